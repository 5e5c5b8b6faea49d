got=$(sh greet.sh world)
[ "$got" = "hello, world" ] || { echo "greet.sh world: want 'hello, world', got '$got'"; exit 1; }
echo "greet: ok"
