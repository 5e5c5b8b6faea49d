# A test suite that hangs: the verifier's timeout ends it.
echo "slow: started"
sleep 600
