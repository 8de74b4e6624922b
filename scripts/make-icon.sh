#!/bin/sh
# Draws the app icon (the admin UI's favicon: a white "A" on an indigo-to-sky rounded
# square) with ImageMagick and writes build/appicon.png (1024 px, what `wails build` wants),
# app/icon.png (256 px: window icon) and app/icon-64.png (tray and notifications).
# Needs the real ImageMagick (/usr/bin/convert, package imagemagick).
set -eu
cd "$(dirname "$0")/.."
IM=/usr/bin/convert
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
S=1024   # drawn at 1024 px, scaled down for smooth edges
# Background: a diagonal gradient clipped to a rounded square.
$IM -size ${S}x${S} -define gradient:angle=135 gradient:'#6366f1-#0ea5e9' "$tmp/grad.png"
$IM -size ${S}x${S} xc:black -fill white -draw "roundrectangle 0,0 $((S-1)),$((S-1)) 256,256" "$tmp/round.png"
# The glyph, from favicon.svg's path scaled by 32 (outer outline, then the counter).
$IM -size ${S}x${S} xc:black -fill white \
  -draw "polygon 512,224 768,800 640,800 588.8,672 435.2,672 384,800 256,800" \
  -fill black -draw "polygon 512,448 460.8,576 563.2,576" "$tmp/glyph.png"
$IM "$tmp/grad.png" "$tmp/round.png" -alpha off -compose CopyOpacity -composite "$tmp/bg.png"
$IM "$tmp/bg.png" \( -size ${S}x${S} xc:white \) "$tmp/glyph.png" -compose over -composite "$tmp/full.png"
mkdir -p build
$IM "$tmp/full.png" -depth 8 -strip build/appicon.png
$IM "$tmp/full.png" -filter Lanczos -resize 256x256 -depth 8 -strip app/icon.png
$IM "$tmp/full.png" -filter Lanczos -resize 64x64 -depth 8 -strip app/icon-64.png
echo "wrote build/appicon.png app/icon.png app/icon-64.png"
