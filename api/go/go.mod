module wharf

go 1.19
