//go:build desktop

// Command wmclose asks an X11 window to close the way a window manager's close button
// does: a WM_DELETE_WINDOW client message (xdotool windowclose destroys the window
// instead, which is not what a person does).
//
//	wmclose WINDOW_ID
package main

/*
#cgo pkg-config: x11
#include <X11/Xlib.h>
#include <string.h>

static int send_delete(unsigned long win) {
	Display *d = XOpenDisplay(NULL);
	if (!d) return 1;
	XEvent ev;
	memset(&ev, 0, sizeof ev);
	ev.xclient.type = ClientMessage;
	ev.xclient.window = win;
	ev.xclient.message_type = XInternAtom(d, "WM_PROTOCOLS", False);
	ev.xclient.format = 32;
	ev.xclient.data.l[0] = XInternAtom(d, "WM_DELETE_WINDOW", False);
	ev.xclient.data.l[1] = CurrentTime;
	XSendEvent(d, win, False, NoEventMask, &ev);
	XSync(d, False);
	XCloseDisplay(d);
	return 0;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: wmclose WINDOW_ID")
		os.Exit(2)
	}
	id, err := strconv.ParseUint(os.Args[1], 0, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wmclose: bad window id:", err)
		os.Exit(2)
	}
	if C.send_delete(C.ulong(id)) != 0 {
		fmt.Fprintln(os.Stderr, "wmclose: cannot open the display")
		os.Exit(1)
	}
}
