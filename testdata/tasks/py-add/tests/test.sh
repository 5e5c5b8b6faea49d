python3 -m pytest -q -p no:cacheprovider test_calc.py
