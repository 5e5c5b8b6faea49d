package docker

// ExecsOnly makes p run every command as an exec: no lease's keeper runs
// one (see keeperrun.go), so tests can hold the exec path to the same
// contract.
func ExecsOnly(p *Provider) { p.execsOnly = true }
