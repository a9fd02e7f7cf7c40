module github.com/wharf/wharf/api/go

go 1.19
