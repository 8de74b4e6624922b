// Command sni stands in for a desktop's tray host in the GUI test, on the session bus:
//
//	sni watch          own org.kde.StatusNotifierWatcher and log each item that registers
//	sni menu           print the registered item's tooltip and menu (com.canonical.dbusmenu)
//	sni click LABEL    click the visible menu item labelled LABEL
//
// menu prints "tooltip: …" and then one line per item: id, label, visible, enabled,
// toggle state (-1 when the item is no checkbox), separated by tabs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

const (
	watcherName  = "org.kde.StatusNotifierWatcher"
	watcherPath  = dbus.ObjectPath("/StatusNotifierWatcher")
	watcherIface = "org.kde.StatusNotifierWatcher"
	itemIface    = "org.kde.StatusNotifierItem"
	menuIface    = "com.canonical.dbusmenu"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sni watch | menu | click LABEL")
		os.Exit(2)
	}
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	switch os.Args[1] {
	case "watch":
		err = watch(conn)
	case "menu":
		err = printMenu(conn)
	case "click":
		if len(os.Args) != 3 {
			err = errors.New("usage: sni click LABEL")
		} else {
			err = click(conn, os.Args[2])
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sni:", err)
	os.Exit(1)
}

// watcher is the minimum of the StatusNotifierWatcher interface an item needs.
type watcher struct {
	conn  *dbus.Conn
	mu    sync.Mutex
	items []string
	props *prop.Properties
}

func (w *watcher) RegisterStatusNotifierItem(sender dbus.Sender, service string) *dbus.Error {
	// An item passes its object path (systray does) or a bus name.
	item := string(sender) + service
	if !strings.HasPrefix(service, "/") {
		item = service + string(itemPathDefault)
	}
	w.mu.Lock()
	w.items = append(w.items, item)
	items := append([]string(nil), w.items...)
	w.mu.Unlock()
	w.props.SetMust(watcherIface, "RegisteredStatusNotifierItems", items)
	w.conn.Emit(watcherPath, watcherIface+".StatusNotifierItemRegistered", item)
	fmt.Printf("registered %s\n", item)
	return nil
}

func (w *watcher) RegisterStatusNotifierHost(string) *dbus.Error { return nil }

const itemPathDefault = dbus.ObjectPath("/StatusNotifierItem")

func watch(conn *dbus.Conn) error {
	props, err := prop.Export(conn, watcherPath, prop.Map{watcherIface: {
		"RegisteredStatusNotifierItems":  {Value: []string{}, Emit: prop.EmitTrue},
		"IsStatusNotifierHostRegistered": {Value: true, Emit: prop.EmitTrue},
		"ProtocolVersion":                {Value: int32(0), Emit: prop.EmitTrue},
	}})
	if err != nil {
		return err
	}
	w := &watcher{conn: conn, props: props}
	if err := conn.Export(w, watcherPath, watcherIface); err != nil {
		return err
	}
	reply, err := conn.RequestName(watcherName, dbus.NameFlagDoNotQueue)
	if err != nil {
		return err
	}
	if reply != dbus.RequestNameReplyPrimaryOwner {
		return errors.New("another StatusNotifierWatcher runs")
	}
	fmt.Println("watching")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	return nil
}

// item finds the registered item's bus name and object path.
func item(conn *dbus.Conn) (string, dbus.ObjectPath, error) {
	v, err := conn.Object(watcherName, watcherPath).GetProperty(watcherIface + ".RegisteredStatusNotifierItems")
	if err != nil {
		return "", "", err
	}
	items, _ := v.Value().([]string)
	if len(items) == 0 {
		return "", "", errors.New("no item registered")
	}
	last := items[len(items)-1]
	i := strings.Index(last, "/")
	if i < 0 {
		return last, itemPathDefault, nil
	}
	return last[:i], dbus.ObjectPath(last[i:]), nil
}

type menuItem struct {
	id      int32
	label   string
	visible bool
	enabled bool
	toggle  int32
}

func layout(conn *dbus.Conn) (string, dbus.ObjectPath, []menuItem, error) {
	name, path, err := item(conn)
	if err != nil {
		return "", "", nil, err
	}
	v, err := conn.Object(name, path).GetProperty(itemIface + ".Menu")
	if err != nil {
		return "", "", nil, fmt.Errorf("item's Menu property: %w", err)
	}
	menuPath, _ := v.Value().(dbus.ObjectPath)
	var (
		revision uint32
		root     struct {
			ID       int32
			Props    map[string]dbus.Variant
			Children []dbus.Variant
		}
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := conn.Object(name, menuPath).CallWithContext(ctx, menuIface+".GetLayout", 0, int32(0), int32(-1), []string{}).Store(&revision, &root); err != nil {
		return "", "", nil, fmt.Errorf("GetLayout: %w", err)
	}
	var items []menuItem
	for _, c := range root.Children {
		// Each child is a (ia{sv}av) struct in a variant.
		fields, ok := c.Value().([]any)
		if !ok || len(fields) < 2 {
			continue
		}
		id, _ := fields[0].(int32)
		props, _ := fields[1].(map[string]dbus.Variant)
		it := menuItem{id: id, visible: true, enabled: true, toggle: -1}
		if t, ok := props["type"]; ok && t.Value() == "separator" {
			continue
		}
		if l, ok := props["label"]; ok {
			it.label, _ = l.Value().(string)
		}
		if x, ok := props["visible"]; ok {
			it.visible, _ = x.Value().(bool)
		}
		if x, ok := props["enabled"]; ok {
			it.enabled, _ = x.Value().(bool)
		}
		if x, ok := props["toggle-state"]; ok {
			it.toggle, _ = x.Value().(int32)
		}
		items = append(items, it)
	}
	return name, menuPath, items, nil
}

func printMenu(conn *dbus.Conn) error {
	name, path, err := item(conn)
	if err != nil {
		return err
	}
	if v, err := conn.Object(name, path).GetProperty(itemIface + ".ToolTip"); err == nil {
		// (sa(iiay)ss): icon name, icon pixmaps, title, description.
		if f, ok := v.Value().([]any); ok && len(f) == 4 {
			fmt.Printf("tooltip: %v\n", f[2])
		}
	}
	_, _, items, err := layout(conn)
	if err != nil {
		return err
	}
	for _, it := range items {
		fmt.Printf("%d\t%s\t%v\t%v\t%d\n", it.id, it.label, it.visible, it.enabled, it.toggle)
	}
	return nil
}

func click(conn *dbus.Conn, label string) error {
	name, menuPath, items, err := layout(conn)
	if err != nil {
		return err
	}
	for _, it := range items {
		if it.label == label && it.visible {
			return conn.Object(name, menuPath).Call(menuIface+".Event", 0, it.id, "clicked", dbus.MakeVariant(int32(0)), uint32(time.Now().Unix())).Err
		}
	}
	return fmt.Errorf("no visible menu item %q", label)
}
