package copilot

import "embed"

// Fixtures holds the golden protocol fixtures (testdata/<case>/…), embedded
// so `outpost doctor` can replay them from the installed binary.
//
//go:embed testdata
var Fixtures embed.FS
