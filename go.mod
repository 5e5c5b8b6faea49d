module github.com/outpost-dev/outpost

go 1.26

require (
	github.com/docker/docker v28.5.2+incompatible // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
