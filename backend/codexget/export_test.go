package codexget

// For the external tests (package codexget_test), which run a Codex the Getter got through
// codex.Runner: package codex imports codexget for the pin, so they cannot live in codexget.
var (
	GoodPackage  = goodPackage
	PinFor       = pinFor
	Registry     = registry
	ServeBytes   = serveBytes
	ManifestName = manifestName
)
