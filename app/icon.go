package app

import (
	"bytes"
	_ "embed"
	"image"
	"image/color"
	"image/draw"
	"image/png"
)

// appIcon is build/appicon.png at 256 px, smallIcon the same at 64 px for the tray and
// notifications (scripts/make-icon.sh writes all of them).
var (
	//go:embed icon.png
	appIcon []byte
	//go:embed icon-64.png
	smallIcon []byte
)

// trayIcons are the tray's icon without and with the "requests waiting" dot.
type trayIcons struct{ plain, badge []byte }

func newTrayIcons() trayIcons {
	badge, err := withBadge(smallIcon)
	if err != nil {
		badge = smallIcon
	}
	return trayIcons{plain: smallIcon, badge: badge}
}

// withBadge draws a red dot in the top right corner, the usual "something waits" mark.
func withBadge(icon []byte) ([]byte, error) {
	src, err := png.Decode(bytes.NewReader(icon))
	if err != nil {
		return nil, err
	}
	b := src.Bounds()
	img := image.NewNRGBA(b)
	draw.Draw(img, b, src, b.Min, draw.Src)
	size := b.Dx()
	r := size * 22 / 100
	cx, cy := b.Max.X-r-size/32, b.Min.Y+r+size/32
	ring := color.NRGBA{255, 255, 255, 255}
	dot := color.NRGBA{0xe0, 0x24, 0x24, 255}
	for y := cy - r - 2; y <= cy+r+2; y++ {
		for x := cx - r - 2; x <= cx+r+2; x++ {
			d := (x-cx)*(x-cx) + (y-cy)*(y-cy)
			switch {
			case d <= r*r:
				img.Set(x, y, dot)
			case d <= (r+size/48+1)*(r+size/48+1):
				img.Set(x, y, ring)
			}
		}
	}
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// notificationImage is the icon as the "image-data" hint of org.freedesktop.Notifications
// wants it: (width, height, rowstride, has alpha, bits per sample, channels, RGBA bytes).
type notificationImage struct {
	Width, Height, Rowstride int32
	HasAlpha                 bool
	Bits, Channels           int32
	Data                     []byte
}

func newNotificationImage(icon []byte) (notificationImage, error) {
	src, err := png.Decode(bytes.NewReader(icon))
	if err != nil {
		return notificationImage{}, err
	}
	b := src.Bounds()
	img := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(img, img.Bounds(), src, b.Min, draw.Src)
	return notificationImage{Width: int32(b.Dx()), Height: int32(b.Dy()), Rowstride: int32(img.Stride),
		HasAlpha: true, Bits: 8, Channels: 4, Data: img.Pix}, nil
}
