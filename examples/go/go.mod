module licenseserver.example/check-license

go 1.19

require licenseserver.example/client v0.0.0

// The client is not published: build it from this repository, so nothing is downloaded.
replace licenseserver.example/client => ../../clients/go
