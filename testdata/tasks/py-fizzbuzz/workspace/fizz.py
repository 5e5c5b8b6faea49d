def fizzbuzz(n):
    return str(n)
