got=$(sh reverse.sh a b c)
[ "$got" = "c b a" ] || { echo "reverse.sh a b c: want 'c b a', got '$got'"; exit 1; }
echo "reverse: ok"
