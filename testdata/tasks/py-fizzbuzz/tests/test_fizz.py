from fizz import fizzbuzz


def test_fizzbuzz():
    assert [fizzbuzz(n) for n in (1, 3, 5, 15, 16)] == ["1", "Fizz", "Buzz", "FizzBuzz", "16"]
