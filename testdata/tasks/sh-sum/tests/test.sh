got=$(sh sum.sh 2 3)
[ "$got" = 5 ] || { echo "sum.sh 2 3: want 5, got $got"; exit 1; }
got=$(sh sum.sh -4 4)
[ "$got" = 0 ] || { echo "sum.sh -4 4: want 0, got $got"; exit 1; }
echo "sum: ok"
