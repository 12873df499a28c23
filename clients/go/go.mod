module licenseserver.example/client

go 1.19
