//go:build linux || freebsd || openbsd || netbsd

package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/wailsapp/wails/v2/pkg/options"
)

// singleInstanceName is the D-Bus name and object path Wails' SingleInstanceLock exports
// for uniqueID (internal/frontend/desktop/linux/single_instance.go builds them the same way).
func singleInstanceName() (name string, path dbus.ObjectPath) {
	id := "wails_app_" + strings.NewReplacer("-", "_", ".", "_").Replace(uniqueID)
	return "org." + id + ".SingleInstance", dbus.ObjectPath("/org/" + id + "/SingleInstance")
}

// handOff gives this launch's arguments to the app already running in this session and
// reports whether it did. Wails' own lock would do the same only after this process had
// started everything (OnStartup runs first) and would then exit 1; asking first keeps a
// second launch free of side effects: no data dir lock, no port, no migration.
func handOff(args []string, log *slog.Logger) bool {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name, path := singleInstanceName()
	var running bool
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, name).Store(&running); err != nil || !running {
		return false
	}
	wd, _ := os.Getwd()
	msg, err := json.Marshal(options.SecondInstanceData{Args: args, WorkingDirectory: wd})
	if err != nil {
		return false
	}
	if err := conn.Object(name, path).CallWithContext(ctx, name+".SendMessage", 0, string(msg)).Err; err != nil {
		log.Warn("Aether seems to be running but did not answer; starting anyway", "err", err)
		return false
	}
	log.Info("Aether is already running: handed the launch over to it")
	return true
}
