module tearline.test/h2sse

go 1.19
