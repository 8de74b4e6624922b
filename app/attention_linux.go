//go:build linux

package app

/*
#cgo pkg-config: gtk+-3.0
#include <stdlib.h>
#include <gtk/gtk.h>

// A window that gets focus clears the hint the owner was asked to look at.
static void aether_active_changed(GObject *w, GParamSpec *p, gpointer d) {
	if (gtk_window_is_active(GTK_WINDOW(w))) gtk_window_set_urgency_hint(GTK_WINDOW(w), FALSE);
}

// aether_attention runs on the GTK main loop: every top-level window with that title is
// shown without taking the focus, and marked urgent unless it has the focus already.
static gboolean aether_attention(gpointer title) {
	GList *all = gtk_window_list_toplevels();
	for (GList *l = all; l != NULL; l = l->next) {
		GtkWindow *w = GTK_WINDOW(l->data);
		if (gtk_window_get_window_type(w) != GTK_WINDOW_TOPLEVEL || g_strcmp0(gtk_window_get_title(w), title) != 0) continue;
		if (g_object_get_data(G_OBJECT(w), "aether-attention") == NULL) {
			g_object_set_data(G_OBJECT(w), "aether-attention", GINT_TO_POINTER(1));
			g_signal_connect(w, "notify::is-active", G_CALLBACK(aether_active_changed), NULL);
		}
		if (!gtk_widget_get_visible(GTK_WIDGET(w))) {
			gtk_window_set_focus_on_map(w, FALSE);
			gtk_widget_show(GTK_WIDGET(w));
			gtk_window_set_focus_on_map(w, TRUE);
		}
		if (!gtk_window_is_active(w)) gtk_window_set_urgency_hint(w, TRUE);
	}
	g_list_free(all);
	g_free(title);
	return G_SOURCE_REMOVE;
}

static void aether_request_attention(const char *title) {
	g_idle_add(aether_attention, g_strdup(title));
}
*/
import "C"

import (
	"context"
	"unsafe"
)

// requestAttention shows the window titled title without taking the focus from whatever the
// owner is typing in, and sets its urgency hint (the WM_HINTS urgency bit on X11) so that the
// desktop marks it: a raise that did not come from the owner never lands a keystroke or a
// click in it (C17). Wails v2 has no such call; GTK's own is used on its main loop.
func requestAttention(_ context.Context, title string) {
	cs := C.CString(title)
	defer C.free(unsafe.Pointer(cs))
	C.aether_request_attention(cs)
}
