# bench/: make bench against nginx.
