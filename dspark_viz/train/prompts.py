"""The project's own prompt suites (math / code / chat) for drafter training and evaluation.

Everything here is written for dspark_viz: procedural templates with many slot values plus a
set of hand-written prompts per domain.  Nothing is copied from public benchmarks.

* ``build_suites(seed, n_train, n_eval_per_domain)`` -> ``(train, eval)`` lists of
  ``{"turns": [prompt], "domain": ...}`` records.  The eval split is disjoint from train in
  prompt text, and it is deliberately *not* just "more of the same": it holds out a share of
  the hand-written prompts, a few templates that never appear in train, and a fifth of every
  slot-value list (names, items, topics, tasks...).
* ``write_suites(out_dir, **kw)`` writes ``train.jsonl`` / ``eval.jsonl``.
* ``load_prompts(path, domain=None, limit=None)`` reads any ``{"turns": [...]}`` JSONL file
  (ours, or a GSM8K / HumanEval / MT-Bench style file) with clear errors.

Run ``python -m dspark_viz.train.prompts OUT_DIR`` to write the suites.  Standard library only.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Callable

DOMAINS = ("math", "code", "chat")

# --------------------------------------------------------------------------------------------
# Slot values.  Every list is split by index: items at i % 5 == 4 are held out for eval.
# --------------------------------------------------------------------------------------------

_SLOTS: dict[str, list] = {}


def _slot(name: str, values: list) -> list:
    _SLOTS[name] = values
    return values


_slot("people", [
    ("Maya", "she"), ("Leo", "he"), ("Aisha", "she"), ("Tom", "he"), ("Sofia", "she"),
    ("Ravi", "he"), ("Emma", "she"), ("Jonas", "he"), ("Lina", "she"), ("Diego", "he"),
    ("Hana", "she"), ("Omar", "he"), ("Grace", "she"), ("Kenji", "he"), ("Nora", "she"),
    ("Samuel", "he"), ("Priya", "she"), ("Lucas", "he"), ("Zoe", "she"), ("Mateo", "he"),
    ("Ines", "she"), ("Felix", "he"), ("Amara", "she"), ("Hugo", "he"), ("Chloe", "she"),
    ("Yusuf", "he"), ("Mei", "she"), ("Oscar", "he"), ("Julia", "she"), ("Ben", "he"),
    ("Elena", "she"), ("Kofi", "he"), ("Ruby", "she"), ("Ivan", "he"), ("Layla", "she"),
    ("Noah", "he"), ("Fatima", "she"), ("Theo", "he"), ("Clara", "she"), ("Arjun", "he"),
])
_slot("shop_items", [
    "pencils", "apples", "notebooks", "stickers", "cupcakes", "bus tickets", "bottles of juice",
    "comic books", "candles", "T-shirts", "bananas", "erasers", "markers", "muffins", "postcards",
    "plant pots", "balloons", "bracelets", "sandwiches", "toy cars", "pairs of socks",
    "light bulbs", "oranges", "cookies", "paintbrushes", "tennis balls", "mugs", "keychains",
    "donuts", "packets of flower seeds", "batteries", "water bottles", "puzzle books", "lemons",
    "cinema tickets",
])
_slot("things", [
    "marbles", "cookies", "stickers", "crayons", "candies", "trading cards", "seashells", "beads",
    "stamps", "grapes", "coins", "strawberries", "toy blocks", "pencils", "buttons", "cherries",
    "balloons", "puzzle pieces", "paper stars", "chocolates", "blueberries", "acorns", "pebbles",
    "ribbons", "glass beads",
])
_slot("vehicles", [
    # (name, lowest km/h, highest km/h)
    ("car", 40, 110), ("train", 60, 200), ("bus", 30, 80), ("delivery van", 30, 90),
    ("cyclist", 10, 30), ("boat", 10, 40), ("motorbike", 40, 100), ("truck", 40, 90),
    ("runner", 8, 16), ("ferry", 15, 40), ("tractor", 10, 30), ("scooter", 15, 45),
    ("horse", 10, 40), ("small plane", 150, 300), ("school bus", 30, 70),
])
_slot("events", [
    "soccer game", "piano lesson", "movie", "team meeting", "school play", "concert", "swim class",
    "cooking class", "board game night", "bus tour", "chess match", "yoga class", "birthday party",
    "science fair", "dance recital", "museum tour", "basketball practice", "book club meeting",
    "art workshop", "football match",
])
_slot("ingredients", [
    "flour", "sugar", "milk", "rice", "oats", "water", "butter", "yogurt", "cocoa powder",
    "chopped nuts", "grated cheese", "blueberries", "honey", "broth", "cream",
])
_slot("containers", [
    ("box", "boxes"), ("crate", "crates"), ("bag", "bags"), ("jar", "jars"),
    ("basket", "baskets"), ("tray", "trays"), ("carton", "cartons"), ("bucket", "buckets"),
    ("envelope", "envelopes"), ("shelf", "shelves"),
])
_slot("pairs", [
    # (group a, group b, where they are)
    ("red marbles", "blue marbles", "jar"), ("cats", "dogs", "animal shelter"),
    ("apples", "pears", "fruit basket"), ("boys", "girls", "classroom"),
    ("roses", "tulips", "flower shop"), ("cars", "bikes", "parking lot"),
    ("novels", "comics", "bookshop"), ("ducks", "geese", "pond"), ("pens", "pencils", "desk drawer"),
    ("oranges", "lemons", "crate"), ("adults", "children", "museum"), ("sheep", "goats", "farm"),
    ("black socks", "white socks", "drawer"), ("cupcakes", "cookies", "bake sale"),
    ("singers", "dancers", "school show"),
])
_slot("big_items", [
    "bike", "jacket", "lamp", "desk chair", "backpack", "tablet", "pair of boots", "guitar",
    "coffee machine", "suitcase", "winter coat", "tent", "printer", "bookshelf", "phone",
])
_slot("unit_pairs", [
    # (big unit, small unit, factor)
    ("meters", "centimeters", 100), ("kilometers", "meters", 1000), ("kilograms", "grams", 1000),
    ("hours", "minutes", 60), ("liters", "milliliters", 1000), ("feet", "inches", 12),
    ("days", "hours", 24), ("weeks", "days", 7), ("minutes", "seconds", 60),
    ("yards", "feet", 3), ("centimeters", "millimeters", 10), ("years", "months", 12),
    ("dozens", "items", 12), ("gallons", "quarts", 4), ("pounds", "ounces", 16),
])
_slot("math_concepts", [
    "add two fractions with different denominators", "find the least common multiple of two numbers",
    "convert a fraction to a decimal", "find the average of a set of numbers",
    "round a number to the nearest hundred", "multiply two negative numbers",
    "find the percentage of a number", "solve a simple equation like 3x = 12",
    "find the area of a triangle", "divide a number by a fraction", "simplify a ratio",
    "find the perimeter of a rectangle", "compare two decimals", "write a number in scientific notation",
    "find the median of a list of numbers", "turn a percent into a fraction",
    "estimate the answer to a multiplication problem", "find the greatest common divisor",
    "calculate simple interest", "work out a unit price when shopping",
    "check whether a number is divisible by 3", "find the volume of a cube",
    "subtract mixed numbers", "solve a proportion",
    "read a number line with negative numbers",
])

# code --------------------------------------------------------------------------------------
_slot("func_tasks", [
    ("sum_list", "returns the sum of a list of numbers"),
    ("count_words", "counts the words in a sentence"),
    ("is_even", "checks whether a number is even"),
    ("max_of_three", "returns the largest of three numbers"),
    ("reverse_string", "reverses a string"),
    ("average", "returns the average of a list of numbers"),
    ("count_uppercase", "counts the uppercase letters in a string"),
    ("celsius_to_fahrenheit", "converts Celsius to Fahrenheit"),
    ("remove_spaces", "removes all the spaces from a string"),
    ("first_and_last", "returns the first and last items of a list"),
    ("is_sorted", "checks whether a list is sorted"),
    ("square_all", "returns a new list with every number squared"),
    ("count_positive", "counts how many numbers in a list are positive"),
    ("longest_word", "returns the longest word in a sentence"),
    ("repeat_string", "repeats a string n times with a space in between"),
    ("sum_digits", "returns the sum of the digits of a positive integer"),
    ("is_vowel", "checks whether a letter is a vowel"),
    ("min_max", "returns the smallest and largest numbers in a list as a tuple"),
    ("count_char", "counts how many times a given character appears in a string"),
    ("title_case", "capitalizes the first letter of each word in a string"),
    ("filter_short_words", "keeps only the words longer than three letters"),
    ("gcd", "returns the greatest common divisor of two numbers"),
    ("power_of_two", "checks whether a number is a power of two"),
    ("unique_items", "returns the unique items of a list in their original order"),
    ("list_to_string", "joins a list of words into one string separated by commas"),
    ("seconds_to_minutes", "converts a number of seconds into minutes and seconds"),
    ("count_lines", "counts the lines in a multi-line string"),
    ("swap_case", "swaps uppercase and lowercase letters in a string"),
    ("chunk_list", "splits a list into chunks of size n"),
    ("invert_dict", "swaps the keys and values of a dictionary"),
    ("multiply_list", "multiplies all the numbers in a list together"),
    ("digits_only", "keeps only the digit characters of a string"),
    ("is_palindrome_number", "checks whether an integer reads the same backwards"),
    ("grade_letter", "turns a test score from 0 to 100 into a letter grade"),
    ("word_lengths", "returns a dictionary mapping each word to its length"),
    ("pairwise_sums", "adds two lists of numbers element by element"),
    ("count_negatives", "counts the negative numbers in a list"),
    ("initials", "returns the initials of a full name"),
    ("middle_item", "returns the middle item of a list"),
    ("celsius_list", "converts a list of Fahrenheit temperatures to Celsius"),
    ("fizzbuzz_value", "returns 'Fizz', 'Buzz', 'FizzBuzz' or the number itself for an input n"),
    ("running_total", "returns the running totals of a list of numbers"),
    ("nth_smallest", "returns the nth smallest number in a list"),
    ("count_even_odd", "counts the even and odd numbers in a list"),
    ("mask_email", "hides the part of an email address before the @ sign with stars"),
    ("clamp", "limits a number to stay between a minimum and a maximum value"),
    ("minutes_to_hours", "converts minutes into a string like '2h 15m'"),
    ("remove_vowels", "removes the vowels from a string"),
    ("dict_from_lists", "builds a dictionary from a list of keys and a list of values"),
    ("last_n_items", "returns the last n items of a list"),
    ("shout", "turns a sentence into uppercase and adds an exclamation mark"),
    ("price_with_tax", "adds a tax percentage to a price and rounds to two decimals"),
    ("count_words_starting_with", "counts the words that start with a given letter"),
    ("sum_of_squares", "returns the sum of the squares from 1 to n"),
    ("is_leap_year", "checks whether a year is a leap year"),
])
_slot("py_concepts", [
    "a list", "a tuple", "a dictionary", "a set", "a for loop", "a while loop", "a function",
    "a return value", "a default argument", "an f-string", "list slicing", "a list comprehension",
    "a class", "an object", "the __init__ method", "inheritance", "an exception", "a module",
    "an import statement", "a variable", "a boolean", "None", "the range function",
    "the len function", "string formatting", "a nested loop", "the break statement",
    "the continue statement", "a global variable", "a lambda function", "a generator",
    "the with statement", "a docstring", "type hints", "the sorted function", "a keyword argument",
    "an if statement", "integer division", "the modulo operator", "a method",
])
_slot("py_diff_pairs", [
    ("a list", "a tuple"), ("a list", "a set"), ("append", "extend"), ("== ", "is"),
    ("sort()", "sorted()"), ("a function", "a method"), ("break", "continue"),
    ("remove()", "pop()"), ("a for loop", "a while loop"), ("print", "return"),
    ("/", "//"), ("a dictionary", "a list"), ("str()", "repr()"), ("a module", "a package"),
    ("a shallow copy", "a deep copy"), ("local variables", "global variables"),
    ("an error", "an exception"), ("a class", "an object"), ("input()", "sys.argv"),
    ("a generator", "a list"), ("range()", "a list of numbers"), ("and", "&"),
    ("None", "an empty string"), ("del", "remove()"), ("split()", "strip()"),
])
_slot("py_errors", [
    "IndexError: list index out of range",
    "TypeError: can only concatenate str (not \"int\") to str",
    "NameError: name 'total' is not defined",
    "KeyError: 'name'",
    "ZeroDivisionError: division by zero",
    "IndentationError: expected an indented block",
    "SyntaxError: invalid syntax",
    "AttributeError: 'list' object has no attribute 'split'",
    "ValueError: invalid literal for int() with base 10: 'abc'",
    "TypeError: 'NoneType' object is not subscriptable",
    "ModuleNotFoundError: No module named 'requests'",
    "FileNotFoundError: [Errno 2] No such file or directory: 'data.txt'",
    "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    "RecursionError: maximum recursion depth exceeded",
    "UnboundLocalError: local variable 'count' referenced before assignment",
    "TypeError: 'int' object is not iterable",
    "AttributeError: 'str' object has no attribute 'append'",
    "TypeError: missing 1 required positional argument: 'name'",
    "IndentationError: unindent does not match any outer indentation level",
    "TypeError: 'str' object does not support item assignment",
])
_slot("algorithms", [
    "bubble sort", "selection sort", "insertion sort", "binary search", "linear search",
    "merge sort", "quick sort", "a function that checks balanced parentheses",
    "a queue using two stacks", "a function that finds the greatest common divisor with Euclid's method",
    "a function that converts a decimal number to binary", "a simple Caesar cipher",
    "counting sort for small integers", "a function that finds all pairs in a list that add up to a target",
    "a function that returns all subsets of a small list", "run-length encoding of a string",
])
_slot("complexity_ops", [
    "looking up a key in a Python dictionary", "appending to a list", "checking `x in my_list`",
    "checking `x in my_set`", "sorting a list with sorted()", "binary search on a sorted list",
    "inserting at the start of a list", "two nested loops over the same list",
    "reversing a string with slicing", "finding the max of a list",
    "popping the last item of a list", "counting characters with a dictionary",
])
_slot("how_ops", [
    "check if a list is empty", "get the last item of a list", "count items in a list",
    "remove an item from a dictionary", "loop over a dictionary's keys and values",
    "convert a list to a set", "convert a number to a string", "round a float to two decimals",
    "read a whole text file into a string", "get user input as a number",
    "sort a list in reverse order", "find the index of an item in a list",
    "check if a string starts with a certain word", "replace a word in a string",
    "remove whitespace from both ends of a string", "make a string lowercase",
    "combine two dictionaries", "create a list of numbers from 1 to 100",
    "get a random number between 1 and 10", "check the type of a variable",
    "write a multi-line string", "add an item at a specific position in a list",
    "get the keys of a dictionary as a list", "split a string by commas",
    "pad a number with leading zeros", "print without a newline at the end",
    "exit a loop early", "return two values from a function", "swap two variables",
    "check if a number is an integer", "count how often each item appears in a list",
    "sum the values of a dictionary", "get today's date", "pause a program for two seconds",
    "format a number with commas as thousands separators",
])
_slot("classes", [
    ("BankAccount", "an owner and a balance", "deposits money and refuses withdrawals bigger than the balance"),
    ("Rectangle", "a width and a height", "returns the area"),
    ("Student", "a name and a list of grades", "returns the average grade"),
    ("Book", "a title, an author and a page count", "returns a short description"),
    ("Counter", "a current value starting at zero", "increments the value by one"),
    ("Dog", "a name and an age", "returns the dog's age in dog years"),
    ("ShoppingCart", "a list of items with prices", "returns the total price"),
    ("Timer", "a number of seconds", "formats the time as minutes and seconds"),
    ("Circle", "a radius", "returns the circumference"),
    ("Playlist", "a name and a list of songs", "adds a song if it is not already in the list"),
    ("Thermostat", "a target temperature", "raises or lowers the target by one degree"),
    ("TodoList", "a list of tasks", "marks a task as done"),
    ("Point", "x and y coordinates", "returns the distance to another point"),
    ("Inventory", "a dictionary of item names and quantities", "removes stock and warns when it runs out"),
    ("Library", "a list of books", "finds all books by a given author"),
])
_slot("file_names", [
    "notes.txt", "scores.txt", "names.txt", "log.txt", "shopping.txt", "poem.txt", "todo.txt",
    "numbers.txt", "diary.txt", "words.txt",
])
_slot("file_actions", [
    "prints how many lines it has", "prints the longest line", "counts how many words it contains",
    "prints each line with its line number", "prints only the lines that contain the word 'error'",
    "adds up the numbers written one per line", "prints the lines in reverse order",
    "writes an uppercase copy to a new file", "prints the 5 most common words",
    "removes empty lines and saves the result",
])
_slot("words", [
    "python", "banana", "keyboard", "rainbow", "teacher", "giraffe", "sunflower", "octopus",
    "library", "pancake", "rocket", "umbrella", "lantern", "mountain", "whisper", "volcano",
    "blanket", "compass", "penguin", "harbor",
])
_slot("var_names", [
    "numbers", "scores", "values", "prices", "ages", "items", "data", "temps", "marks", "counts",
])
_slot("func_names", [
    "find_max", "biggest", "largest", "get_max", "top_value", "max_value", "highest", "best_of",
    "pick_max", "max_item",
])

# chat --------------------------------------------------------------------------------------
_slot("activities", [
    "studying for exams", "running my first 5K", "keeping a clean kitchen", "saving money",
    "learning to swim as an adult", "taking better photos with my phone", "waking up early",
    "starting a vegetable garden", "working from home", "traveling on a budget",
    "making new friends at school", "writing a good cover letter", "staying focused while reading",
    "learning to draw", "cooking for one person", "moving to a new city", "training a puppy",
    "packing light for a trip", "giving a wedding speech", "reducing screen time",
    "keeping a journal", "learning to cook rice", "staying warm in winter", "eating more vegetables",
    "organizing my closet", "preparing for a long flight", "starting to meditate",
    "being a good listener", "taking care of a cat", "learning to ride a bike",
    "hosting a dinner party", "keeping my phone battery healthy", "practicing the piano",
    "recycling at home", "running a book club", "choosing a good watermelon",
    "sleeping well in a hot room", "decorating a small room", "walking more each day",
    "writing a short story", "learning to juggle", "keeping plants alive indoors",
    "talking to my kids about screen time", "getting ready for a job fair", "camping with children",
])
_slot("topics", [
    "how the heart pumps blood", "what gravity is", "how a battery works", "what a black hole is",
    "how plants make food from sunlight", "what an election is", "how clouds form",
    "why we need sleep", "what a calorie is", "how a compass works", "what DNA is",
    "how money in a bank earns interest", "what the greenhouse effect is", "how a bicycle stays upright",
    "what a volcano is", "how sound travels", "what a recession is", "how the moon causes tides",
    "why the seasons change", "how a microwave heats food", "what an atom is",
    "how recycling works", "what a credit score is", "how our eyes see color",
    "what photosynthesis is", "how earthquakes happen", "what a democracy is",
    "how a light bulb works", "what a vaccine does", "why we sneeze", "how GPS finds my location",
    "what an eclipse is", "how bread rises", "what a tax is", "how fish breathe underwater",
    "what a food chain is", "how a thermometer works", "what electricity is",
    "how birds know where to migrate", "what the stock market is", "how a rocket gets to space",
    "why ice floats", "what a fossil is", "how the immune system works", "what wind is",
    "how a camera takes a picture", "what a budget is", "how bridges hold weight",
    "why we have time zones", "how soap cleans",
])
_slot("characters", [
    "a shy dragon", "a lost kitten", "an old lighthouse keeper", "a curious robot",
    "a young chef", "a talking tree", "a forgetful wizard", "a brave little mouse",
    "a grandmother who loves skateboarding", "a penguin who hates the cold", "a new student",
    "a friendly ghost", "a tired mail carrier", "a girl who can talk to birds",
    "a boy who builds a rocket", "a clumsy knight", "a lonely snowman", "a retired astronaut",
    "a street musician", "a stubborn goat", "a tiny elephant", "a bakery cat",
    "a time-traveling teacher", "a shy giraffe", "a sleepy bear",
])
_slot("story_events", [
    "finds a mysterious map", "gets lost in a big city", "enters a baking contest",
    "makes an unexpected friend", "learns to fly", "has to save the town's festival",
    "discovers a secret door", "wakes up with a strange new talent", "goes on a first trip to the sea",
    "tries to fix a broken clock", "plants a magic seed", "finds a letter from the future",
    "gets stuck in an elevator", "joins a soccer team", "loses a favorite hat",
    "helps a neighbor move house", "finds a treasure in the attic", "meets a talking cloud",
    "spends a day without electricity", "wins a prize by accident",
])
_slot("email_targets", [
    ("teacher", "asking for an extension on my homework"),
    ("landlord", "about a leaking kitchen tap"),
    ("manager", "asking to work from home on Mondays"),
    ("coworker", "thanking them for helping with a project"),
    ("friend", "inviting them to my birthday dinner"),
    ("neighbor", "asking them to water my plants while I'm away"),
    ("doctor's office", "asking to move my appointment"),
    ("team", "announcing that the meeting is moved to Thursday"),
    ("customer", "apologizing for a late delivery"),
    ("coach", "explaining that I will miss practice this week"),
    ("school", "letting them know my child is sick today"),
    ("client", "sending a friendly reminder about an unpaid invoice"),
    ("cousin", "congratulating them on their new baby"),
    ("gym", "asking how to cancel my membership"),
    ("former boss", "asking for a reference letter"),
    ("book club", "suggesting our next book"),
    ("hotel", "asking for a late check-out"),
    ("professor", "asking a question about the exam"),
    ("new neighbor", "welcoming them to the street"),
    ("colleague", "saying goodbye on my last day"),
])
_slot("compare_pairs", [
    ("a frog", "a toad"), ("a lake", "a pond"), ("a hurricane", "a tornado"), ("tea", "coffee"),
    ("a city", "a town"), ("a rabbit", "a hare"), ("a star", "a planet"), ("empathy", "sympathy"),
    ("a cold", "the flu"), ("a fruit", "a vegetable"), ("a jog", "a sprint"), ("baking", "roasting"),
    ("a poem", "a song"), ("a debit card", "a credit card"), ("a museum", "a gallery"),
    ("a moth", "a butterfly"), ("a breeze", "a gale"), ("a hill", "a mountain"),
    ("renting", "buying a home"), ("a dolphin", "a shark"), ("a novel", "a short story"),
    ("a violin", "a cello"), ("a lunar eclipse", "a solar eclipse"), ("a sea", "an ocean"),
    ("a village", "a city"), ("jam", "jelly"), ("a bakery", "a patisserie"),
    ("a dentist", "an orthodontist"), ("a lemon", "a lime"), ("a bee", "a wasp"),
    ("a biography", "an autobiography"), ("a walk", "a hike"), ("soup", "stew"),
    ("a ferry", "a cruise ship"), ("rain", "drizzle"),
])
_slot("vocab", [
    "serendipity", "resilient", "meticulous", "nostalgia", "frugal", "candid", "ambiguous",
    "benevolent", "procrastinate", "tenacious", "whimsical", "eloquent", "diligent", "empathy",
    "gregarious", "humble", "inevitable", "jovial", "lethargic", "mundane", "novice", "optimistic",
    "pragmatic", "quaint", "reluctant", "skeptical", "tranquil", "vivid", "wary", "zealous",
    "abundant", "brisk", "cozy", "dwindle", "eager", "fragile", "gloomy", "hasty", "idle",
    "keen",
])
_slot("why_questions", [
    "Why do we yawn?", "Why do onions make us cry?", "Why is grass green?",
    "Why do stars twinkle?", "Why do dogs wag their tails?", "Why does bread go stale?",
    "Why do our fingers wrinkle in water?", "Why do birds sing in the morning?",
    "Why is the sun hot?", "Why do we get hiccups?", "Why does ice melt faster with salt?",
    "Why do bananas turn brown?", "Why do we have fingerprints?", "Why do zebras have stripes?",
    "Why do we get goosebumps?", "Why does the wind blow?", "Why is snow white?",
    "Why do some people need glasses?", "Why do cats land on their feet?",
    "Why do we need to drink water?", "Why do balloons float?", "Why do apples fall down?",
    "Why do some trees lose their leaves in winter?", "Why does a spoon look bent in a glass of water?",
    "Why do we feel dizzy after spinning?", "Why does thunder come after lightning?",
    "Why do owls hunt at night?", "Why do we have eyebrows?", "Why does popcorn pop?",
    "Why do mosquitoes bite some people more than others?",
])
_slot("poem_subjects", [
    "the sea at night", "a cup of hot tea", "my old bicycle", "autumn leaves", "a busy city street",
    "a lazy cat", "the first day of spring", "a thunderstorm", "a train journey", "my grandmother's garden",
    "the moon", "a quiet library", "a summer picnic", "a lost sock", "the smell of rain",
    "a mountain sunrise", "friendship", "a snowy forest", "a kite in the wind", "coffee on Monday",
])
_slot("rec_things", [
    ("books", "a long train ride"), ("board games", "a family evening"), ("movies", "a rainy day"),
    ("snacks", "a road trip"), ("podcasts", "my daily walk"), ("gifts", "a friend who loves cooking"),
    ("songs", "a morning workout"), ("houseplants", "a dark apartment"), ("hobbies", "a retired teacher"),
    ("games", "a kids' birthday party"), ("dinners", "a busy weeknight"), ("activities", "a snowy day"),
    ("breakfasts", "a school morning"), ("gifts", "a coworker who is leaving"), ("picnic foods", "a hot day"),
    ("exercises", "people who sit all day"), ("books", "a teenager who likes adventure"),
    ("desserts", "a summer barbecue"), ("apps", "learning new words"), ("party themes", "a 30th birthday"),
])
_slot("trip_places", [
    "the beach", "the mountains", "a big city", "a small seaside town", "a national park",
    "the countryside", "a lake with a cabin", "a city with many museums", "a warm island",
    "a snowy village", "a historic old town", "a desert", "a wine region", "a forest cabin",
    "a city I have never visited",
])
_slot("pros_cons", [
    "working from home", "owning a car in the city", "living with roommates", "getting a dog",
    "studying abroad", "buying a used phone", "waking up at 5 am", "living in the countryside",
    "taking a gap year", "shopping online", "learning two languages at once", "cooking every day",
    "renting an apartment", "taking public transport", "having a big family", "using a paper calendar",
    "working at a startup", "going to college far from home", "electric cars", "reading e-books",
    "homeschooling", "four-day work weeks", "traveling alone", "having a smartwatch",
    "living in a small house",
])
_slot("sentences", [
    "send me the report now", "the party was okay i guess", "we need to talk about your work",
    "your order is late because of problems", "i can't come tomorrow", "the food was bad",
    "please stop being late", "thanks for the gift", "the meeting is canceled",
    "you forgot to call me back", "this product does not work", "i want a refund",
    "the new park is nice", "we lost the game", "i finished the project",
])
_slot("tones", [
    "polite", "friendly", "formal", "cheerful", "professional", "gentle", "confident", "funny",
])
_slot("howto_tasks", [
    "remove a coffee stain from a shirt", "boil an egg", "change a flat bike tire",
    "make a simple budget", "clean a laptop keyboard", "fold a fitted sheet",
    "unclog a sink without chemicals", "make a paper airplane", "write a thank-you card",
    "iron a shirt", "set up a new email account", "plant tomatoes", "sharpen a kitchen knife",
    "brew good coffee without a machine", "wash a wool sweater", "hang a picture on the wall",
    "make a smoothie", "back up my phone photos", "start a compost pile", "clean a fish tank",
    "make a grocery list", "store fresh herbs", "defrost a freezer", "make homemade lemonade",
    "remove a splinter", "change a light bulb safely", "teach a dog to sit", "pack a suitcase neatly",
    "make a cup of chai", "cook pasta so it doesn't stick",
])
_slot("occasions", [
    "a rainy afternoon with kids", "a friend's surprise party", "a team-building day",
    "a romantic dinner at home", "a school fundraiser", "a summer weekend",
    "a mother's day gift", "a class presentation", "a neighborhood cleanup", "a winter evening",
    "a beach day", "a small wedding", "a science project", "a first date", "a family reunion",
    "a garage sale", "a retirement party", "a Halloween costume", "a picnic in the park",
    "a New Year's resolution",
])
_slot("describe_things", [
    "a busy train station", "a farmers' market", "your ideal bedroom", "a forest after rain",
    "a hospital waiting room", "a cozy café", "a school playground at noon", "an old bookstore",
    "a beach at sunset", "a kitchen during a holiday dinner", "a snowy street at night",
    "a crowded concert", "a quiet library", "a lighthouse in a storm", "a spring garden",
])
_slot("trivia", [
    "What is the largest planet in our solar system?", "How many continents are there?",
    "Which animal is the fastest on land?", "What is the longest river in the world?",
    "How many bones are in the adult human body?", "What gas do plants take in from the air?",
    "Which ocean is the biggest?", "How many players are on a soccer team on the field?",
    "What is the hardest natural material?", "Which planet is known as the Red Planet?",
    "What language has the most native speakers?", "How long does light from the sun take to reach Earth?",
    "What is the smallest country in the world?", "How many hearts does an octopus have?",
    "What is the boiling point of water at sea level?", "Which bird is the largest in the world?",
    "How many strings does a standard guitar have?", "What is the main ingredient in guacamole?",
    "How many days does it take the Earth to go around the sun?", "What is the largest desert on Earth?",
    "Which metal is liquid at room temperature?", "How many teeth does an adult usually have?",
    "What is the coldest place on Earth?", "How many colors are in a rainbow?",
    "Which animal can sleep standing up?", "What is the most common element in the universe?",
    "How tall is a giraffe, roughly?", "Which country has the most people?",
    "How many minutes are in a soccer match?", "What is the closest star to Earth?",
])
_slot("situations", [
    ("roommate", "never does the dishes"), ("friend", "always cancels plans at the last minute"),
    ("coworker", "takes credit for my ideas"), ("neighbor", "parks in front of my driveway"),
    ("sister", "borrowed my sweater and lost it"), ("boss", "emails me late at night"),
    ("teenage son", "spends all day on his phone"), ("best friend", "forgot my birthday"),
    ("dog", "barks whenever the doorbell rings"), ("classmate", "copies my homework"),
    ("partner", "wants to move to another city"), ("grandfather", "feels lonely since he retired"),
    ("team", "keeps missing deadlines"), ("cat", "scratches the sofa"),
    ("little sister", "is scared of the dark"), ("landlord", "is slow to fix things"),
    ("friend", "talks about herself all the time"), ("daughter", "does not want to go to school"),
    ("coworker", "is always late to meetings"), ("brother", "owes me money"),
])
_slot("roles", [
    "a friendly tour guide", "a chef", "a librarian", "a park ranger", "a fitness coach",
    "a museum guide", "a gardener", "a pirate captain", "a travel agent", "a kind teacher",
])
_slot("gifts", [
    "the birthday scarf", "helping me move", "the homemade cookies", "the book you lent me",
    "looking after my cat", "the flowers", "the lovely dinner", "driving me to the airport",
    "the advice about my job", "the surprise party",
])

# --------------------------------------------------------------------------------------------
# Hand-written prompts.  Every third one (index % 3 == 2) is kept for eval only.
# --------------------------------------------------------------------------------------------

HANDWRITTEN: dict[str, list[str]] = {
    "math": [
        "If a train leaves at 3:15 pm and the trip takes 2 hours and 50 minutes, what time does it arrive?",
        "A farmer has chickens and cows. There are 20 heads and 56 legs in total. How many cows are there?",
        "What is the smallest number that is divisible by 2, 3, 4, 5 and 6?",
        "Explain why any number multiplied by zero is zero.",
        "How do I find the area of a circle with a radius of 5 cm?",
        "Is 0.5 bigger than 0.45? Explain how you know.",
        "Tom is twice as old as his sister. In 5 years the sum of their ages will be 34. How old is Tom now?",
        "What is the difference between the mean and the median? Give a small example.",
        "A pizza is cut into 8 slices. If I eat 3 slices, what fraction of the pizza is left?",
        "How many seconds are there in one day?",
        "Round 3.14159 to two decimal places.",
        "Simplify the fraction 18/24.",
        "What is 15% of 80, and how did you get it?",
        "A square has a perimeter of 36 meters. What is its area?",
        "If 3 notebooks cost $4.50, how much do 7 notebooks cost?",
        "What is the next number in the pattern 2, 6, 18, 54, ...?",
        "Solve the equation 2(x - 3) = 14.",
        "How many different ways can you arrange the letters A, B and C?",
        "A car uses 6 liters of fuel for every 100 km. How much fuel does it need for a 350 km trip?",
        "What is a prime number? List the prime numbers less than 30.",
        "Convert 0.75 to a fraction and to a percent.",
        "A shop sells a jacket for $60 after a 25% discount. What was the original price?",
        "If you flip a fair coin twice, what is the probability of getting two heads?",
        "What is the greatest common divisor of 48 and 36?",
        "A water tank holds 500 liters and is 40% full. How many more liters are needed to fill it?",
        "Write 4,506 in expanded form.",
        "How many minutes are there in 3.5 hours?",
        "What is negative 7 plus 12?",
        "The angles of a triangle are 50 degrees and 60 degrees. What is the third angle?",
        "Anna bikes 12 km in 40 minutes. What is her average speed in km per hour?",
        "Explain what a variable is in algebra, using a simple example.",
        "Which is larger: 2/3 or 5/8?",
        "A class has 12 boys and 18 girls. What percentage of the class are girls?",
        "Multiply 3/4 by 2/5 and simplify the answer.",
        "How do you turn a mixed number like 2 3/4 into an improper fraction?",
        "What is 1,000 divided by 8?",
        "A garden is 8 meters long and 5 meters wide. How much fencing is needed to go around it?",
        "If today is Wednesday, what day of the week will it be in 100 days?",
        "What is the volume of a box that is 4 cm by 5 cm by 6 cm?",
        "Factor the expression x^2 + 5x + 6.",
        "A bakery makes 240 cookies and packs them in boxes of 12. How many boxes does it fill?",
        "What is the sum of the whole numbers from 1 to 50?",
        "How many edges does a cube have?",
        "Lisa scored 78, 85 and 92 on three tests. What score does she need on the fourth test to average 85?",
        "Explain the order of operations and use it to work out 8 + 2 × 5 - 3.",
        "What is the slope of the line that passes through (1, 2) and (3, 8)?",
        "How much is 2 to the power of 10?",
        "A movie is 2 hours and 15 minutes long. How many minutes is that?",
        "Three friends split a bill of $84 equally and add a $12 tip, also shared equally. How much does each person pay?",
        "What is the circumference of a circle with a diameter of 10 inches? Use 3.14 for pi.",
        "Is 91 a prime number?",
        "How many quarters are in $7?",
        "A runner completes 4 laps of a 400 meter track. How many kilometers did she run?",
        "Solve for y: y/4 + 3 = 10.",
        "What are the first ten square numbers?",
        "If a shirt costs $20 and the tax is 8%, what is the total price?",
        "A bus has 45 seats. If 128 students go on a trip, how many buses are needed?",
        "Explain the difference between area and perimeter.",
        "What is 999 + 999 + 999? Is there a quick way to do it in your head?",
        "Write the number 0.003 in scientific notation.",
        "A clock shows 9:00. What is the angle between the hour hand and the minute hand?",
        "How many legs do 7 spiders and 4 ants have altogether?",
        "I drive 60 km to work at 40 km/h and back home at 60 km/h. What is my average speed for the whole trip?",
    ],
    "code": [
        "Write a Python function that returns the nth Fibonacci number.",
        "Why does this code print None?\n\n```python\ndef add(a, b):\n    print(a + b)\n\nresult = add(2, 3)\nprint(result)\n```",
        "How do I read a CSV file in Python without using pandas?",
        "Explain what `if __name__ == \"__main__\":` does in a Python script.",
        "Write a Python program that prints the multiplication table for the numbers 1 to 9.",
        "What does the `enumerate` function do? Show a short example.",
        "Fix this code so it doesn't crash:\n\n```python\nnumbers = [1, 2, 3]\nprint(numbers[3])\n```",
        "How can I remove duplicates from a list while keeping the original order?",
        "Write a Python function that counts the vowels in a string.",
        "What is a lambda function in Python? When should I use one?",
        "Write a function that merges two sorted lists into one sorted list.",
        "How do I sort a list of dictionaries by the value of the key 'age'?",
        "What is the output of `print(7 // 2, 7 % 2, 7 / 2)` in Python?",
        "Write a simple number guessing game in Python where the computer picks a number from 1 to 100.",
        "Why is it a bad idea to use a mutable default argument like `def f(items=[])`?",
        "Write a Python function that flattens a list of lists into a single list.",
        "Explain the difference between `==` and `is` in Python with an example.",
        "How do I get the current date and time in Python?",
        "Write a Python function that checks if two strings are anagrams.",
        "What does this code do?\n\n```python\nsquares = {n: n * n for n in range(5)}\n```",
        "Write a function that returns the second largest number in a list.",
        "How do I handle a division by zero error in Python using try and except?",
        "Write a Python function that converts a Roman numeral like 'XIV' into an integer.",
        "What are *args and **kwargs in Python?",
        "Write a Python function that capitalizes the first letter of every word in a sentence without using title().",
        "How do I write a list of strings to a text file, one per line?",
        "This loop never stops. Why?\n\n```python\ni = 0\nwhile i < 10:\n    print(i)\n```",
        "Write a function that returns True if a year is a leap year and False otherwise.",
        "What is recursion? Show a recursive function that computes a factorial.",
        "How do I check whether a key exists in a dictionary?",
        "Write a Python function that finds the most common word in a piece of text.",
        "Explain what a Python virtual environment is and why it is useful.",
        "How can I measure how long a piece of Python code takes to run?",
        "Write a function that takes a list of numbers and returns only the even ones.",
        "What happens if I call `list.sort()` and assign the result to a variable?",
        "Fix the indentation error in this code:\n\n```python\ndef greet(name):\nprint('Hello, ' + name)\n```",
        "Write a Python function that checks if a number is prime.",
        "How do I convert a string like '42' into an integer, and what happens if the string is 'abc'?",
        "Write a Python class called Stack with push, pop and is_empty methods.",
        "What does the `zip` function do? Give an example with two lists.",
        "Write a function that returns the factorial of a number using a loop instead of recursion.",
        "How can I pick a random item from a list in Python?",
        "Write a Python function that converts a temperature from Fahrenheit to Celsius.",
        "What is a dictionary comprehension? Show one example.",
        "Write a Python function that checks whether a string contains only digits.",
        "Why does `0.1 + 0.2 == 0.3` return False in Python?",
        "Write a binary search function in Python for a sorted list of numbers.",
        "How do I split a sentence into words in Python?",
        "When should I use a for loop and when should I use a while loop?",
        "Write a Python function that returns the length of the longest word in a sentence.",
        "What will this print?\n\n```python\nx = [1, 2, 3]\ny = x\ny.append(4)\nprint(x)\n```",
        "Write a Python script that asks the user for their name and age and prints a greeting.",
        "How do I join a list of strings with commas?",
        "Write a function that rotates a list to the right by k positions.",
        "Explain what `with open(...) as f:` does and why it is preferred.",
        "Write a Python function that returns a dictionary counting how many times each character appears in a string.",
        "What is a docstring and how do I write one for a function?",
        "Write a function that checks whether a list is sorted in ascending order.",
        "How do I make a copy of a list so that changing the copy doesn't change the original?",
        "Write a Python function that generates all the prime numbers up to n using the Sieve of Eratosthenes.",
        "What is the difference between returning a value and printing it inside a function?",
        "Write a tiny to-do list program in Python that lets the user add tasks and list them.",
        "Write a Python function that checks whether a password has at least 8 characters, one digit and one uppercase letter.",
    ],
    "chat": [
        "What are some easy ways to drink more water during the day?",
        "Can you explain how a rainbow forms?",
        "Write a short poem about a rainy Monday morning.",
        "I have a job interview tomorrow. How should I prepare tonight?",
        "What is the difference between weather and climate?",
        "Give me three ideas for a cheap but fun weekend.",
        "Why do cats purr?",
        "Write a polite message to my neighbor asking them to turn down their music at night.",
        "How can I stop procrastinating when I have a big project?",
        "Explain what the internet is to someone who has never used a computer.",
        "What should I pack for a three-day camping trip?",
        "Tell me a fun fact about octopuses.",
        "How do I politely say no when a friend asks to borrow money?",
        "Write a short story about a robot who learns to bake bread.",
        "What are the benefits of reading before bed?",
        "Can you suggest a name for a small bakery that sells mostly bread?",
        "Why do leaves change color in the fall?",
        "I feel nervous about speaking in public. Any advice?",
        "What is a good way to start learning to play the guitar?",
        "Summarize the story of Cinderella in three sentences.",
        "How do vaccines help the body fight disease?",
        "Write a birthday message for my grandmother who is turning 90.",
        "What are some good questions to ask on a first date?",
        "Explain the difference between a virus and a bacterium.",
        "How can I make my small apartment feel bigger?",
        "What is the tallest mountain in the world, and how tall is it?",
        "Give me a simple recipe for pancakes.",
        "How do airplanes stay in the air?",
        "My friend is sad because her dog died. What can I say to comfort her?",
        "What is the best way to learn new words in a foreign language?",
        "Write a haiku about the first snow of winter.",
        "Why do we have leap years?",
        "How do I keep houseplants alive if I travel a lot?",
        "What are some healthy snacks I can bring to work?",
        "Explain what inflation is in simple words.",
        "Write a short thank-you note to a teacher at the end of the school year.",
        "What is the difference between a crocodile and an alligator?",
        "How can I fall asleep faster at night?",
        "Tell me a short joke about computers.",
        "What are the main causes of stress at work and how can I reduce them?",
        "Describe a perfect lazy Sunday in a few sentences.",
        "Why is the ocean salty?",
        "Should I learn to cook at home or keep eating out? Give me some pros and cons.",
        "How does a refrigerator keep food cold?",
        "Write a short email to my boss asking for Friday off.",
        "What are some ways to make friends in a new city?",
        "How do bees make honey?",
        "Can you recommend a few hobbies that don't cost much money?",
        "What is the meaning of the phrase 'break the ice'?",
        "How do I write a good resume if I have no work experience?",
        "Why do we dream?",
        "Explain how to tie a tie, step by step.",
        "Write a two-sentence spooky story that is not too scary for kids.",
        "What is the difference between a hobby and a passion?",
        "How can I save money on groceries each month?",
        "Why does the moon look different each night?",
        "Give me a short motivational message for someone starting a new job.",
        "What is a good way to apologize after an argument with a friend?",
        "Who invented the telephone, and how did it change the world?",
        "What is the capital of Australia? Many people get it wrong.",
        "Plan a simple dinner menu for four friends, one of whom is vegetarian.",
        "How do I clean a burnt pot?",
        "My little brother asks why the sky is dark at night. How can I explain it to him?",
    ],
}

# --------------------------------------------------------------------------------------------
# Template machinery
# --------------------------------------------------------------------------------------------


class _Slots:
    """Attribute access to the slot lists, restricted to one part: "train", "eval" or "all"."""

    def __init__(self, part: str):
        if part not in ("train", "eval", "all"):
            raise ValueError(f"unknown slot part {part!r}")
        self.part = part
        self._cache: dict[str, list] = {}

    def __getattr__(self, key: str) -> list:
        if key.startswith("_") or key == "part":
            raise AttributeError(key)
        if key not in self._cache:
            values = _SLOTS[key]
            if self.part == "all":
                sel = list(values)
            elif self.part == "eval":
                sel = [v for i, v in enumerate(values) if i % 5 == 4]
            else:
                sel = [v for i, v in enumerate(values) if i % 5 != 4]
            self._cache[key] = sel
        return self._cache[key]


Gen = Callable[[random.Random, _Slots], str]


def _money(x: float) -> str:
    return f"${x:.2f}" if round(x * 100) % 100 else f"${int(round(x))}"


def _price(r: random.Random, lo: int = 1, hi: int = 15) -> float:
    return r.randint(lo, hi) + r.choice([0, 0, 0, 0.25, 0.5, 0.75])


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _fmt_list(xs: list) -> str:
    xs = [str(x) for x in xs]
    return ", ".join(xs[:-1]) + " and " + xs[-1] if len(xs) > 1 else xs[0]


# ---- math templates -------------------------------------------------------------------------


def _m_shopping(r, S):
    name, pr = r.choice(S.people)
    item = r.choice(S.shop_items)
    n, p = r.randint(2, 12), _price(r, 1, 9)
    return r.choice([
        f"{name} buys {n} {item} for {_money(p)} each. How much does {pr} spend in total?",
        f"One of the {item} costs {_money(p)}. How much do {n} of them cost?",
        f"{name} wants {n} {item}. Each one costs {_money(p)}. What is the total cost?",
    ])


def _m_change(r, S):
    name, pr = r.choice(S.people)
    item = r.choice(S.shop_items)
    n, p = r.randint(2, 6), _price(r, 1, 6)
    bill = next(b for b in (10, 20, 50, 100) if b > n * p)
    return r.choice([
        f"{name} buys {n} {item} at {_money(p)} each and pays with a ${bill} bill. How much change does {pr} get?",
        f"I paid ${bill} for {n} {item} that cost {_money(p)} each. How much change should I get back?",
    ])


def _m_share(r, S):
    name, pr = r.choice(S.people)
    thing = r.choice(S.things)
    k = r.randint(2, 9)
    total = k * r.randint(3, 15)
    return r.choice([
        f"{name} has {total} {thing} and shares them equally among {k} friends. How many {thing} does each friend get?",
        f"There are {total} {thing} to split evenly into {k} groups. How many go in each group?",
        f"{name} wants to put {total} {thing} into {k} equal piles. How many {thing} are in each pile?",
    ])


def _m_speed(r, S):
    v, lo, hi = r.choice(S.vehicles)
    speed = r.randint(lo // 2, hi // 2) * 2
    t = r.choice([0.5, 1.5, 2, 2.5, 3, 4, 5])
    ts = f"{t:g} hours" if t != 1 else "1 hour"
    if r.random() < 0.5:
        return f"{_cap(_a(v))} travels at {speed} km/h for {ts}. How far does it go?"
    d = int(speed * t) if speed * t == int(speed * t) else speed * 2
    return f"{_cap(_a(v))} covers {d} km at a steady {speed} km/h. How long does the trip take?"


def _m_time(r, S):
    ev = r.choice(S.events)
    h, mm = r.randint(1, 11), r.choice([0, 5, 10, 15, 20, 30, 40, 45, 50])
    dur = r.choice([25, 35, 45, 50, 75, 80, 90, 95, 105, 120, 135])
    ampm = r.choice(["am", "pm"])
    return r.choice([
        f"The {ev} starts at {h}:{mm:02d} {ampm} and lasts {dur} minutes. What time does it end?",
        f"If the {ev} begins at {h}:{mm:02d} {ampm} and runs for {dur} minutes, when is it over?",
    ])


def _m_percent(r, S):
    p = r.choice([5, 10, 12, 15, 20, 25, 30, 40, 50, 60, 75, 80])
    x = r.choice([20, 40, 60, 80, 120, 150, 200, 240, 300, 360, 400, 450, 500, 640, 800, 1200])
    item = r.choice(S.big_items)
    return r.choice([
        f"What is {p}% of {x}?",
        f"Work out {p} percent of {x} and explain the steps.",
        f"A {item} costs ${x} and is on sale for {p}% off. What is the sale price?",
        f"A store raises the price of a {item} from ${x} by {p}%. What is the new price?",
    ])


def _m_linear(r, S):
    a, x = r.randint(2, 9), r.randint(-5, 15)
    b = r.randint(1, 30) * r.choice([1, -1])
    c = a * x + b
    sb = f"+ {b}" if b >= 0 else f"- {-b}"
    var = r.choice(["x", "x", "n", "y"])
    return r.choice([
        f"Solve for {var}: {a}{var} {sb} = {c}.",
        f"What value of {var} makes {a}{var} {sb} = {c} true? Show your steps.",
        f"Find {var} if {a}{var} {sb} = {c}.",
    ])


def _m_arith(r, S):
    k = r.randrange(5)
    if k == 0:
        a, b = r.randint(12, 99), r.randint(11, 99)
        return r.choice([f"What is {a} × {b}?", f"Calculate {a} times {b}.", f"Multiply {a} by {b}."])
    if k == 1:
        a, b, c = r.randint(100, 999), r.randint(100, 999), r.randint(10, 99)
        return f"Compute {a} + {b} - {c}."
    if k == 2:
        b, q = r.randint(3, 12), r.randint(12, 90)
        return r.choice([f"What is {b * q} divided by {b}?", f"Divide {b * q} by {b}."])
    if k == 3:
        a, b, c = r.randint(2, 20), r.randint(2, 9), r.randint(2, 9)
        op = r.choice(["+", "-"])
        return f"What is {a} {op} {b} × {c}? Remember the order of operations."
    a, b = round(r.uniform(1, 50), 1), round(r.uniform(1, 50), 2)
    return f"Add {a} and {b}."


def _m_units(r, S):
    big, small, f = r.choice(S.unit_pairs)
    n = r.choice([2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 2.5, 1.5, 3.5])
    if r.random() < 0.6:
        return r.choice([
            f"How many {small} are in {n:g} {big}?",
            f"Convert {n:g} {big} to {small}.",
        ])
    m = int(n * f) if n * f == int(n * f) else int(f * 3)
    return f"How many {big} is {m} {small}?"


def _m_geometry(r, S):
    w, h = r.randint(2, 25), r.randint(2, 25)
    unit = r.choice(["cm", "m", "inches", "feet"])
    place = r.choice(["rectangle", "rectangular garden", "room", "rug", "poster", "playground"])
    return r.choice([
        f"A {place} is {w} {unit} wide and {h} {unit} long. What is its area?",
        f"What is the perimeter of a {place} that measures {w} {unit} by {h} {unit}?",
        f"A square has sides of {w} {unit}. What are its area and perimeter?",
        f"A {place} has an area of {w * h} square {unit} and a width of {w} {unit}. How long is it?",
    ])


def _m_age(r, S):
    (n1, _), (n2, _) = r.sample(S.people, 2)
    a, d, y = r.randint(4, 40), r.randint(2, 30), r.randint(2, 12)
    return r.choice([
        f"{n1} is {a} years old. {n2} is {d} years older. How old will {n2} be in {y} years?",
        f"{n1} is {a} and {n2} is {a + d}. How old was {n2} when {n1} was born?",
        f"In {y} years {n1} will be {a + y}. How old was {n1} {min(a, d)} years ago?",
    ])


def _m_fraction(r, S):
    d = r.choice([2, 3, 4, 5, 6, 8, 10])
    n = r.randint(1, d - 1)
    x = d * r.randint(2, 20)
    name, pr = r.choice(S.people)
    thing = r.choice(S.things)
    return r.choice([
        f"What is {n}/{d} of {x}?",
        f"{name} has {x} {thing} and gives away {n}/{d} of them. How many does {pr} give away?",
        f"Add {n}/{d} and {r.randint(1, 2)}/{r.choice([3, 4, 6, 8, 12])}. Write the answer in simplest form.",
    ])


def _m_average(r, S):
    k = r.randint(3, 6)
    xs = [r.randint(1, 100) for _ in range(k)]
    name, _ = r.choice(S.people)
    return r.choice([
        f"What is the average of {_fmt_list(xs)}?",
        f"{name} got these test scores: {', '.join(map(str, xs))}. What is the mean score?",
        f"Find the mean and the median of {', '.join(map(str, xs))}.",
    ])


def _m_ratio(r, S):
    a, b, place = r.choice(S.pairs)
    p1, p2 = r.randint(1, 5), r.randint(1, 7)
    total = (p1 + p2) * r.randint(2, 12)
    return f"In a {place}, the ratio of {a} to {b} is {p1}:{p2}. If there are {total} in total, how many {a} are there?"


def _m_savings(r, S):
    name, pr = r.choice(S.people)
    s = r.choice([3, 4, 5, 6, 7.5, 8, 10, 12, 15, 20, 25])
    goal = s * r.randint(4, 20)
    item = r.choice(["bike", "video game", "pair of shoes", "tablet", "guitar", "skateboard",
                     "concert ticket", "telescope", "camera", "tent"])
    return r.choice([
        f"{name} saves {_money(s)} every week for a {item} that costs {_money(goal)}. How many weeks will it take?",
        f"{name} puts {_money(s)} in a jar each week. How much will {pr} have after {r.randint(5, 30)} weeks?",
    ])


def _m_recipe(r, S):
    ing = r.choice(S.ingredients)
    q = r.choice([1, 1.5, 2, 2.5, 3, 4])
    s1 = r.choice([2, 3, 4, 6])
    s2 = s1 * r.choice([2, 3]) if r.random() < 0.6 else r.choice([1, 5, 8, 10])
    return f"A recipe uses {q:g} cups of {ing} for {s1} servings. How many cups are needed for {s2} servings?"


def _m_reading(r, S):
    name, pr = r.choice(S.people)
    p, d = r.randint(8, 45), r.randint(3, 21)
    book = p * d + r.randint(0, 40)
    return r.choice([
        f"{name} reads {p} pages a day. How many pages will {pr} read in {d} days?",
        f"A book has {book} pages. If {name} reads {p} pages a day, how many days will it take to finish?",
    ])


def _m_temperature(r, S):
    c = r.choice([-10, -5, 0, 5, 10, 15, 20, 25, 30, 35, 37, 40, 100])
    f = r.choice([32, 41, 50, 59, 68, 77, 86, 95, 104, 212])
    return r.choice([
        f"Convert {c} degrees Celsius to Fahrenheit.",
        f"Convert {f} degrees Fahrenheit to Celsius.",
        f"It is {c}°C outside. What is that in °F?",
    ])


def _m_powers(r, S):
    n = r.randint(4, 25)
    return r.choice([
        f"What is the square root of {n * n}?",
        f"What is {n} squared?",
        f"What is {n} cubed?" if n < 13 else f"Is {n * n + 1} a perfect square?",
        f"Is {r.randint(20, 200)} a prime number? Explain how you checked.",
        f"List all the factors of {r.choice([12, 18, 24, 30, 36, 42, 48, 60, 72, 84, 90, 96, 100])}.",
    ])


def _m_interest(r, S):
    P = r.choice([100, 200, 250, 500, 800, 1000, 1500, 2000, 5000])
    rate = r.choice([2, 3, 4, 5, 6, 8, 10])
    t = r.randint(1, 6)
    name, pr = r.choice(S.people)
    return r.choice([
        f"{name} puts ${P} in a savings account with {rate}% simple interest per year. How much interest does {pr} earn in {t} years?",
        f"How much simple interest is earned on ${P} at {rate}% per year for {t} years?",
    ])


def _m_explain(r, S):
    c = r.choice(S.math_concepts)
    return r.choice([
        f"Can you show me how to {c}, with an example?",
        f"Explain step by step how to {c}.",
        f"I always forget how to {c}. Can you explain it simply?",
    ])


def _m_multistep(r, S):
    (n1, p1), (n2, _) = r.sample(S.people, 2)
    thing = r.choice(S.things)
    a = r.randint(15, 80)
    b, c = r.randint(2, a - 5), r.randint(2, 30)
    return r.choice([
        f"{n1} had {a} {thing}. {_cap(p1)} gave {b} to {n2} and then bought {c} more. How many {thing} does {n1} have now?",
        f"{n1} collected {a} {thing} on Monday and {c} on Tuesday, then lost {b}. How many are left?",
    ])


def _m_containers(r, S):
    (c1, cp), thing = r.choice(S.containers), r.choice(S.things)
    n = r.randint(4, 24)
    total = n * r.randint(3, 20) + r.randint(0, n - 1)
    return r.choice([
        f"Each {c1} holds {n} {thing}. How many {cp} are needed for {total} {thing}?",
        f"There are {total} {thing} and each {c1} fits {n}. How many {cp} can be filled completely, and how many {thing} are left over?",
    ])


# eval-only math templates
def _me_sum_diff(r, S):
    a, b = r.randint(10, 90), r.randint(1, 60)
    return f"The sum of two numbers is {a + b + b} and their difference is {a}. What are the two numbers?"


def _me_consecutive(r, S):
    n, k = r.randint(3, 60), r.choice([2, 3, 4])
    word = {2: "two", 3: "three", 4: "four"}[k]
    return f"The sum of {word} consecutive whole numbers is {sum(range(n, n + k))}. What are the numbers?"


def _me_pct_change(r, S):
    a = r.choice([20, 40, 50, 80, 120, 150, 200, 250, 400])
    p = r.choice([10, 20, 25, 30, 50])
    b = a + a * p // 100 * r.choice([1, -1])
    item = r.choice(S.big_items)
    return f"The price of a {item} changed from ${a} to ${b}. What is the percent change?"


def _me_tickets(r, S):
    a, c = r.randint(8, 25), r.randint(3, 12)
    x, y = r.randint(1, 4), r.randint(1, 6)
    ev = r.choice(S.events)
    return (f"Tickets to the {ev} cost ${a} for adults and ${c} for children. A family buys {x} adult "
            f"and {y} child tickets. How much do they pay?")


def _me_triangle(r, S):
    a, b = r.randint(3, 20), r.randint(3, 20)
    c = r.randint(abs(a - b) + 1, a + b - 1)
    unit = r.choice(["cm", "m", "inches"])
    return r.choice([
        f"A triangle has sides of {a} {unit}, {b} {unit} and {c} {unit}. What is its perimeter?",
        f"A triangle has a base of {a} {unit} and a height of {b} {unit}. What is its area?",
    ])


def _me_work_rate(r, S):
    (n1, _), (n2, _) = r.sample(S.people, 2)
    t1, t2 = r.choice([(2, 3), (3, 6), (4, 4), (2, 6), (4, 12), (3, 3), (6, 12)])
    job = r.choice(["paint a fence", "clean the house", "wash the cars", "fold the laundry", "rake the leaves"])
    return f"{n1} can {job} in {t1} hours and {n2} can do it in {t2} hours. How long does it take if they work together?"


# ---- code templates -------------------------------------------------------------------------

def _code(src: str) -> str:
    return "```python\n" + src.rstrip("\n") + "\n```"


def _c_function(r, S):
    fname, task = r.choice(S.func_tasks)
    return r.choice([
        f"Write a Python function called `{fname}` that {task}.",
        f"Write a Python function that {task}.",
        f"How do I write a function in Python that {task}?",
        f"Can you show me a short Python function that {task}? Please add a usage example.",
        f"I need a Python function `{fname}` that {task}. Keep it simple.",
    ])


def _c_function_tests(r, S):
    fname, task = r.choice(S.func_tasks)
    return r.choice([
        f"Write a function `{fname}` that {task}, and a few assert statements to test it.",
        f"Write pytest tests for a function `{fname}` that {task}.",
        f"What edge cases should I test for a Python function that {task}?",
    ])


def _c_output(r, S):
    k = r.randrange(6)
    if k == 0:
        a = r.randint(0, 5)
        b = a + r.randint(3, 8)
        var = r.choice(["total", "s", "acc", "result"])
        src = f"{var} = 0\nfor i in range({a}, {b}):\n    {var} += i\nprint({var})"
    elif k == 1:
        w = r.choice(S.words)
        i = r.randint(0, 3)
        j = i + r.randint(2, 4)
        expr = r.choice([f"word[{i}:{j}]", "word[::-1]", "word.upper()", "word[-3:]",
                         f"word[{i}] * 3", "len(word)"])
        src = f"word = \"{w}\"\nprint({expr})"
    elif k == 2:
        nums = [r.randint(1, 12) for _ in range(r.randint(4, 6))]
        m = r.randint(2, 5)
        src = f"nums = {nums}\nprint([n * {m} for n in nums if n % 2 == 0])"
    elif k == 3:
        x, y, z = r.randint(1, 9), r.randint(1, 9), r.randint(1, 9)
        src = f"d = {{'a': {x}, 'b': {y}}}\nd['c'] = {z}\nd['a'] += 1\nprint(len(d), sum(d.values()))"
    elif k == 4:
        x, m = r.randint(10, 99), r.choice([2, 3, 4, 5, 7])
        src = f"x = {x}\nif x % {m} == 0:\n    print('divisible')\nelif x > 50:\n    print('big')\nelse:\n    print('small')"
    else:
        n = r.randint(3, 6)
        ch = r.choice(["*", "#", "+", "o"])
        src = f"for i in range(1, {n}):\n    print('{ch}' * i)"
    q = r.choice([
        "What does this Python code print?",
        "What is the output of this code?",
        "Can you walk me through what this code does, line by line?",
        "Explain this Python snippet and tell me what it prints.",
    ])
    return f"{q}\n\n{_code(src)}"


def _c_fix(r, S):
    k = r.randrange(7)
    fn, arg = r.choice(S.func_names), r.choice(S.var_names)
    if k == 0:
        src = f"def {fn}({arg}):\n    best = 0\n    for x in {arg}:\n        if x > best:\n            best = x\n    return best"
        issue = "It should return the largest number, but it gives the wrong answer when all the numbers are negative."
    elif k == 1:
        src = f"def double_all({arg}):\n    result = []\n    for x in {arg}:\n        result.append(x * 2)"
        issue = "It always returns None."
    elif k == 2:
        n = r.randint(5, 100)
        src = f"total = 0\nfor i in range(1, {n}):\n    total += i\nprint(total)"
        issue = f"I want the sum of 1 to {n}, but the answer is too small."
    elif k == 3:
        age = r.randint(8, 80)
        name, _ = r.choice(S.people)
        src = f"name = \"{name}\"\nage = {age}\nprint(name + ' is ' + age + ' years old')"
        issue = "It crashes with a TypeError."
    elif k == 4:
        v = r.randint(1, 20)
        src = f"count = {v}\nif count = {v}:\n    print('match')"
        issue = "I get a SyntaxError."
    elif k == 5:
        nums = [r.randint(1, 20) for _ in range(6)]
        src = f"{arg} = {nums}\nfor x in {arg}:\n    if x % 2 == 0:\n        {arg}.remove(x)\nprint({arg})"
        issue = "Some even numbers are still in the list."
    else:
        w = " ".join(r.sample(S.words, 4))
        src = f"text = \"{w} {w.split()[0]}\"\ncounts = {{}}\nfor word in text.split():\n    counts[word] += 1\nprint(counts)"
        issue = "It raises a KeyError."
    q = r.choice(["Can you fix this code?", "What is wrong with this code?",
                  "Please find the bug in this Python code.", "Help me debug this."])
    return f"{q} {issue}\n\n{_code(src)}"


def _c_concept(r, S):
    c = r.choice(S.py_concepts)
    return r.choice([
        f"Explain what {c} is in Python, with a short example.",
        f"What is {c} in Python and when would I use it?",
        f"I'm new to Python. Can you explain {c} simply?",
    ])


def _c_diff(r, S):
    a, b = r.choice(S.py_diff_pairs)
    a = a.strip()
    return r.choice([
        f"What is the difference between {a} and {b} in Python?",
        f"In Python, when should I use {a} instead of {b}?",
    ])


def _c_class(r, S):
    cls, attrs, method = r.choice(S.classes)
    return r.choice([
        f"Write a Python class `{cls}` that stores {attrs} and has a method that {method}.",
        f"Create a simple `{cls}` class in Python with {attrs}, plus a method that {method}. Show how to use it.",
    ])


def _c_comprehension(r, S):
    v = r.choice(["x", "n", "item", "num", "w"])
    seq = r.choice(S.var_names)
    cond, expr = r.choice([
        (f"{v} > {r.randint(0, 10)}", f"{v} * {r.randint(2, 5)}"),
        (f"{v} % 2 == 0", f"{v} ** 2"),
        (f"{v} != 0", f"1 / {v}"),
        (f"{v} < {r.randint(10, 100)}", f"{v} + {r.randint(1, 9)}"),
        (f"{v} % 3 == 0", f"str({v})"),
    ])
    src = f"result = []\nfor {v} in {seq}:\n    if {cond}:\n        result.append({expr})"
    q = r.choice(["Rewrite this loop as a list comprehension:", "Can this be written in one line with a list comprehension?",
                  "How would I turn this loop into a list comprehension?"])
    return f"{q}\n\n{_code(src)}"


def _c_file(r, S):
    f, act = r.choice(S.file_names), r.choice(S.file_actions)
    return r.choice([
        f"Write a Python script that reads a text file named {f} and {act}.",
        f"How can I open {f} in Python and write code that {act}?",
    ])


def _c_complexity(r, S):
    op = r.choice(S.complexity_ops)
    return r.choice([
        f"What is the time complexity of {op}? Explain briefly.",
        f"Is {op} fast or slow for a big list? Explain with Big O.",
    ])


def _c_error(r, S):
    e = r.choice(S.py_errors)
    return r.choice([
        f"I get this error in Python: `{e}`. What does it mean and how do I fix it?",
        f"My Python program stops with `{e}`. What usually causes this?",
        f"What does `{e}` mean?",
    ])


def _c_algorithm(r, S):
    a = r.choice(S.algorithms)
    return r.choice([
        f"Implement {a} in Python and explain how it works.",
        f"Can you write {a} in Python with comments?",
        f"Show me {a} in Python, as simple as possible.",
    ])


def _c_howto(r, S):
    op = r.choice(S.how_ops)
    return r.choice([
        f"How do I {op} in Python?",
        f"What's the easiest way to {op} in Python?",
        f"Python question: how can I {op}?",
    ])


def _c_strings(r, S):
    w = r.choice(S.words)
    ch = r.choice("aeiouns")
    n = r.randint(2, 6)
    return r.choice([
        f"Write a Python function that counts how many times the letter '{ch}' appears in a string. Test it on \"{w}\".",
        f"How can I check in Python whether the word \"{w}\" contains the letter '{ch}'?",
        f"Write Python code that prints the word \"{w}\" {n} times, each on its own line.",
        f"Write Python code that prints every letter of \"{w}\" with its position.",
    ])


def _c_records(r, S):
    names = r.sample([n for n, _ in S.people], 3)
    field = r.choice(["score", "age", "price", "points", "minutes"])
    vals = [r.randint(5, 99) for _ in names]
    data = "[" + ", ".join(f"{{'name': '{n}', '{field}': {v}}}" for n, v in zip(names, vals)) + "]"
    op = r.choice([
        f"prints the name with the highest {field}", f"sorts the list by {field}",
        f"computes the average {field}", f"keeps only the entries with a {field} above {r.randint(20, 80)}",
        f"builds a dictionary from name to {field}", f"prints each name and {field} on its own line",
    ])
    return f"I have a list like {data}. Write Python code that {op}."


def _c_builtin_expr(r, S):
    xs = [r.randint(-9, 20) for _ in range(r.randint(3, 5))]
    w = r.choice(S.words)
    a, b = r.randint(0, 5), r.randint(8, 20)
    expr = r.choice([
        f"sorted({xs}, reverse=True)", f"max({xs}) - min({xs})", f"sum({xs}) / len({xs})",
        f"list(range({a}, {b}, {r.randint(2, 4)}))", f"'{w}'.count('{r.choice(w)}')",
        f"'-'.join('{w}')", f"'{w}'.find('{r.choice(w)}')", f"[x for x in {xs} if x < 0]",
        f"list(zip('{w[:3]}', {xs[:3]}))", f"'{w}'.replace('{w[0]}', '{w[0].upper()}')",
        f"{xs}[::2]", f"len(set('{w}'))",
    ])
    return r.choice([f"What does `{expr}` return in Python?",
                     f"In Python, what is the value of `{expr}`? Explain why."])


def _c_program(r, S):
    prog = r.choice([
        "simulates rolling two dice 1000 times and counts how often each total appears",
        "prints a countdown from 10 to 1 and then says 'Liftoff!'",
        "keeps asking for a password until the user types the right one",
        "prints a table converting kilometers to miles for 1 to 10 km",
        "asks three quiz questions and prints the final score",
        "lets the user build a shopping list and prints it at the end",
        "picks a random joke from a list and prints it",
        "asks for a number and says whether it is positive, negative or zero",
        "prints all the even numbers between 1 and 50",
        "asks for the radius of a circle and prints the area",
        "plays rock, paper, scissors against the user",
        "counts down the days until a date the user enters",
        "prints a simple box made of '#' characters with a given width and height",
        "asks for a sentence and prints it backwards",
        "calculates a tip for a restaurant bill",
        "prints the times table for a number the user chooses",
        "converts a time in seconds into hours, minutes and seconds",
        "asks for test scores until the user types 'done' and then prints the average",
        "prints the first 20 numbers of the Fibonacci sequence",
        "checks whether a word entered by the user is a palindrome",
    ])
    return r.choice([f"Write a Python program that {prog}.",
                     f"Can you write a small Python script that {prog}?",
                     f"I'm a beginner. How would I write a Python program that {prog}?"])


# eval-only code templates
def _ce_docstring(r, S):
    fname, task = r.choice(S.func_tasks)
    arg = r.choice(["values", "text", "items", "n", "data"])
    return (f"Add type hints and a docstring to this function, which {task}:\n\n"
            + _code(f"def {fname}({arg}):\n    ..."))


def _ce_generator(r, S):
    what = r.choice(["the even numbers up to n", "the squares of the numbers from 1 to n",
                     "the lines of a file one at a time", "the Fibonacci numbers below a limit",
                     "the words of a sentence in reverse order", "every second item of a list",
                     "countdown numbers from n to 1", "pairs of neighbouring items in a list"])
    return r.choice([f"Write a Python generator that yields {what}.",
                     f"How do I use `yield` to produce {what} in Python?"])


def _ce_refactor(r, S):
    arg = r.choice(S.var_names)
    lim = r.randint(10, 100)
    src = (f"def check({arg}):\n    ok = True\n    for i in range(len({arg})):\n        if {arg}[i] > {lim}:\n"
           f"            ok = False\n    if ok == True:\n        return True\n    else:\n        return False")
    return r.choice(["Refactor this function to be shorter and easier to read:",
                     "How could this code be written more clearly?"]) + "\n\n" + _code(src)


def _ce_translate_loop(r, S):
    n = r.randint(3, 12)
    a = r.randint(2, 9)
    src = f"i = 0\nwhile i < {n}:\n    print(i * {a})\n    i += 1"
    return r.choice(["Rewrite this while loop as a for loop:", "Turn this into a for loop with range():"]) + "\n\n" + _code(src)


def _ce_review(r, S):
    fname, task = r.choice(S.func_tasks)
    return r.choice([
        f"I wrote a function `{fname}` that {task}. What common mistakes should I watch out for?",
        f"Explain, step by step, how you would plan a Python function that {task} before writing any code.",
    ])


# ---- chat templates -------------------------------------------------------------------------

def _h_tips(r, S):
    a = r.choice(S.activities)
    n = r.choice([3, 4, 5])
    return r.choice([
        f"What are some tips for {a}?",
        f"Give me {n} simple tips for {a}.",
        f"I need advice on {a}. Where should I start?",
        f"What mistakes do beginners make when {a}?",
    ])


def _h_explain(r, S):
    t = r.choice(S.topics)
    return r.choice([
        f"Can you explain {t} in simple terms?",
        f"Explain {t} in a few sentences.",
        f"I've always wondered {t}. Can you explain?",
        f"Give me a short, easy explanation of {t}.",
    ])


def _h_story(r, S):
    c, e = r.choice(S.characters), r.choice(S.story_events)
    return r.choice([
        f"Write a short story about {c} who {e}.",
        f"Tell me a bedtime story about {c} who {e}.",
        f"Write a very short story (under 150 words) about {c} who {e}.",
    ])


def _h_email(r, S):
    who, why = r.choice(S.email_targets)
    return r.choice([
        f"Write a short email to my {who} {why}.",
        f"Help me write a polite message to my {who} {why}.",
        f"Can you draft a brief note to my {who} {why}?",
    ])


def _h_compare(r, S):
    a, b = r.choice(S.compare_pairs)
    return r.choice([
        f"What is the difference between {a} and {b}?",
        f"How can I tell {a} from {b}?",
        f"Compare {a} and {b} in a few sentences.",
    ])


def _h_define(r, S):
    w = r.choice(S.vocab)
    return r.choice([
        f"What does the word '{w}' mean? Use it in a sentence.",
        f"Define '{w}' and give me an example sentence.",
        f"What is a simpler word for '{w}'?",
    ])


def _h_why(r, S):
    q = r.choice(S.why_questions)
    return r.choice([q, f"{q} Keep the answer short.", f"Quick question: {q[0].lower() + q[1:]}"])


def _h_poem(r, S):
    s = r.choice(S.poem_subjects)
    return r.choice([
        f"Write a short poem about {s}.",
        f"Write a haiku about {s}.",
        f"Write a funny limerick about {s}.",
        f"Write four rhyming lines about {s}.",
    ])


def _h_recommend(r, S):
    thing, ctx = r.choice(S.rec_things)
    n = r.choice([3, 4, 5])
    return r.choice([
        f"Can you suggest {n} {thing} for {ctx}?",
        f"What are some good {thing} for {ctx}?",
        f"Recommend a few {thing} for {ctx} and say why you picked each one.",
    ])


def _h_plan(r, S):
    p = r.choice(S.trip_places)
    d = r.choice(["two-day", "three-day", "one-day", "weekend", "five-day"])
    who = r.choice(["with my family", "alone", "with two friends", "with my partner", "with kids"])
    return r.choice([
        f"Help me plan a {d} trip to {p} {who}.",
        f"What should I bring for a {d} trip to {p}?",
        f"I'm going to {p} {who}. What are some fun things to do there?",
    ])


def _h_proscons(r, S):
    c = r.choice(S.pros_cons)
    return r.choice([
        f"What are the pros and cons of {c}?",
        f"Is {c} a good idea? Give me both sides.",
        f"List two advantages and two disadvantages of {c}.",
    ])


def _h_rewrite(r, S):
    s, tone = r.choice(S.sentences), r.choice(S.tones)
    return r.choice([
        f"Rewrite this sentence to sound more {tone}: \"{s}\"",
        f"Make this message more {tone}: \"{s}\"",
        f"How can I say \"{s}\" in a more {tone} way?",
    ])


def _h_howto(r, S):
    t = r.choice(S.howto_tasks)
    return r.choice([
        f"How do I {t}?",
        f"What's the easiest way to {t}?",
        f"Can you give me step-by-step instructions to {t}?",
    ])


def _h_ideas(r, S):
    o = r.choice(S.occasions)
    n = r.choice([3, 4, 5, 6])
    return r.choice([
        f"Give me {n} ideas for {o}.",
        f"I need some creative ideas for {o}. Any suggestions?",
        f"Brainstorm a short list of ideas for {o}.",
    ])


def _h_describe(r, S):
    d = r.choice(S.describe_things)
    return r.choice([
        f"Describe {d} in three sentences.",
        f"Write a short description of {d} using all five senses.",
        f"Paint a picture with words: {d}.",
    ])


def _h_trivia(r, S):
    q = r.choice(S.trivia)
    return r.choice([q, f"Trivia question: {q}", f"{q} Please explain briefly."])


def _h_situation(r, S):
    who, sit = r.choice(S.situations)
    return r.choice([
        f"My {who} {sit}. What should I do?",
        f"My {who} {sit}. How can I bring it up kindly?",
        f"Any advice? My {who} {sit}.",
    ])


# eval-only chat templates
def _he_roleplay(r, S):
    role = r.choice(S.roles)
    q = r.choice(["What would you say to a visitor on their first day?", "What is the best part of your job?",
                  "Give me one piece of advice.", "Introduce yourself in two sentences.",
                  "What do people usually get wrong about your work?"])
    return f"Pretend you are {role}. {q}"


def _he_thanks(r, S):
    g = r.choice(S.gifts)
    who = r.choice(["my aunt", "my best friend", "my neighbor", "a coworker", "my brother", "my teacher",
                    "my grandparents", "my roommate"])
    return f"Write a warm thank-you note to {who} for {g}."


def _he_kid(r, S):
    t = r.choice(S.topics)
    age = r.choice([5, 6, 7, 8, 10])
    return f"Explain {t} to a {age}-year-old."


def _he_packing(r, S):
    p = r.choice(S.trip_places)
    season = r.choice(["summer", "winter", "spring", "autumn"])
    return f"Make me a short packing list for a trip to {p} in {season}."


def _he_opinion(r, S):
    a, b = r.choice(S.compare_pairs)
    return f"If you had to choose between {a} and {b} as the subject of a school report, which would you pick and why?"


# --------------------------------------------------------------------------------------------
# Registry: templates shared by train and eval (eval uses held-out slot values) and
# templates used only for eval.
# --------------------------------------------------------------------------------------------

TEMPLATES: dict[str, dict[str, list[Gen]]] = {
    "math": {
        "shared": [_m_shopping, _m_change, _m_share, _m_speed, _m_time, _m_percent, _m_linear,
                   _m_arith, _m_units, _m_geometry, _m_age, _m_fraction, _m_average, _m_ratio,
                   _m_savings, _m_recipe, _m_reading, _m_temperature, _m_powers, _m_interest,
                   _m_explain, _m_multistep, _m_containers],
        "eval_only": [_me_sum_diff, _me_consecutive, _me_pct_change, _me_tickets, _me_triangle,
                      _me_work_rate],
    },
    "code": {
        "shared": [_c_function, _c_function_tests, _c_output, _c_fix, _c_concept, _c_diff, _c_class,
                   _c_comprehension, _c_file, _c_complexity, _c_error, _c_algorithm, _c_howto,
                   _c_strings, _c_records, _c_builtin_expr, _c_program],
        "eval_only": [_ce_docstring, _ce_generator, _ce_refactor, _ce_translate_loop, _ce_review],
    },
    "chat": {
        "shared": [_h_tips, _h_explain, _h_story, _h_email, _h_compare, _h_define, _h_why, _h_poem,
                   _h_recommend, _h_plan, _h_proscons, _h_rewrite, _h_howto, _h_ideas, _h_describe,
                   _h_trivia, _h_situation],
        "eval_only": [_he_roleplay, _he_thanks, _he_kid, _he_packing, _he_opinion],
    },
}


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _round_robin(rng: random.Random, gens: list[Gen], slots: _Slots, need: int, seen: set[str],
                 tries: int = 40) -> list[str]:
    """Draw up to ``need`` new prompts, one template at a time in turn, so no template dominates.

    A template that fails ``tries`` times in a row to give an unseen prompt is retired.
    """
    out: list[str] = []
    active = list(gens)
    rng.shuffle(active)
    while len(out) < need and active:
        still = []
        for gen in active:
            if len(out) >= need:
                still.append(gen)
                continue
            for _ in range(tries):
                text = gen(rng, slots).strip()
                key = _norm(text)
                if key not in seen:
                    seen.add(key)
                    out.append(text)
                    still.append(gen)
                    break
        active = still
    return out


def _split_handwritten(domain: str) -> tuple[list[str], list[str]]:
    hw = HANDWRITTEN[domain]
    return ([p for i, p in enumerate(hw) if i % 3 != 2], [p for i, p in enumerate(hw) if i % 3 == 2])


def build_suites(seed: int = 0, n_train: int = 2400,
                 n_eval_per_domain: int = 80) -> tuple[list[dict], list[dict]]:
    """Build (train, eval) prompt records ``{"turns": [prompt], "domain": d}``.

    Train has ``n_train`` records split evenly across math / code / chat (shuffled together);
    eval has ``n_eval_per_domain`` records per domain (grouped by domain), with no prompt text
    in common with train.  Eval mixes held-out hand-written prompts (~1/4), eval-only templates
    and shared templates filled with held-out slot values.  Deterministic for a given seed.
    """
    if n_train < 0 or n_eval_per_domain < 0:
        raise ValueError("n_train and n_eval_per_domain must be >= 0")
    rng = random.Random(seed)
    train_slots, eval_slots, all_slots = _Slots("train"), _Slots("eval"), _Slots("all")
    seen: set[str] = set()

    # eval first, so train never reuses its text
    eval_recs: list[dict] = []
    for d in DOMAINS:
        _, hw_eval = _split_handwritten(d)
        hw_eval = [p for p in hw_eval if _norm(p) not in seen]
        rng.shuffle(hw_eval)
        hw = hw_eval[:min(len(hw_eval), round(n_eval_per_domain * 0.25))]
        seen.update(_norm(p) for p in hw)
        rest = n_eval_per_domain - len(hw)
        only = _round_robin(rng, TEMPLATES[d]["eval_only"], all_slots, (rest + 1) // 2, seen)
        shared = _round_robin(rng, TEMPLATES[d]["shared"], eval_slots, rest - len(only), seen)
        texts = hw + only + shared
        if len(texts) < n_eval_per_domain:
            raise ValueError(f"could only build {len(texts)} unique eval prompts for {d!r}")
        rng.shuffle(texts)
        eval_recs += [{"turns": [t], "domain": d} for t in texts]

    # train: the remaining hand-written prompts + shared templates with train slot values
    train_recs: list[dict] = []
    base, extra = divmod(n_train, len(DOMAINS))
    for i, d in enumerate(DOMAINS):
        need = base + (1 if i < extra else 0)
        hw_train, _ = _split_handwritten(d)
        hw = []
        for p in hw_train:
            if _norm(p) not in seen:
                seen.add(_norm(p))
                hw.append(p)
        gen = _round_robin(rng, TEMPLATES[d]["shared"], train_slots, max(0, need - len(hw)), seen)
        texts = hw + gen
        rng.shuffle(texts)
        if len(texts) < need:
            raise ValueError(f"could only build {len(texts)} unique train prompts for {d!r}")
        train_recs += [{"turns": [t], "domain": d} for t in texts[:need]]
    rng.shuffle(train_recs)
    return train_recs, eval_recs


def _write_jsonl(path: Path, records: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def write_suites(out_dir: str | Path, **kw) -> dict[str, Path]:
    """Write ``train.jsonl`` and ``eval.jsonl`` under ``out_dir`` (created if needed).

    Keyword arguments go to :func:`build_suites`.  Returns ``{"train": path, "eval": path}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, evals = build_suites(**kw)
    paths = {"train": out / "train.jsonl", "eval": out / "eval.jsonl"}
    _write_jsonl(paths["train"], train)
    _write_jsonl(paths["eval"], evals)
    return paths


# --------------------------------------------------------------------------------------------
# Loading any {"turns": [...]} JSONL file
# --------------------------------------------------------------------------------------------

_NAME_HINTS = (("gsm8k", "math"), ("humaneval", "code"), ("human_eval", "code"),
               ("mt-bench", "chat"), ("mt_bench", "chat"), ("mtbench", "chat"))


def infer_domain(path: str | Path) -> str:
    """Domain from a file name: gsm8k -> math, humaneval -> code, mt-bench -> chat, else mixed."""
    name = Path(path).name.lower()
    for hint, domain in _NAME_HINTS:
        if hint in name:
            return domain
    return "mixed"


def load_prompts(path: str | Path, domain: str | None = None, limit: int | None = None) -> list[dict]:
    """Read a JSONL file of ``{"turns": [str, ...], "domain"?: str, ...}`` records.

    Records keep all their fields; one without ``"domain"`` gets the domain inferred from the
    file name (:func:`infer_domain`).  ``domain`` keeps only records of that domain; ``limit``
    keeps the first ``limit`` of those.  Blank lines are skipped.  Raises ``ValueError`` for a
    missing file, a line that is not valid JSON (naming the line), or a record without a
    non-empty ``"turns"`` list of strings.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"prompt file not found: {p}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    fallback = infer_domain(p)
    records: list[dict] = []
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if limit is not None and len(records) >= limit:
                break
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{p}: line {lineno} is not valid JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{p}: line {lineno} must be a JSON object, got {type(rec).__name__}")
            turns = rec.get("turns")
            if (not isinstance(turns, list) or not turns
                    or not all(isinstance(t, str) for t in turns) or not turns[0].strip()):
                raise ValueError(f"{p}: line {lineno} needs a non-empty \"turns\" list of strings "
                                 f"(first turn non-blank)")
            if not isinstance(rec.get("domain"), str) or not rec.get("domain"):
                rec["domain"] = fallback
            if domain is not None and rec["domain"] != domain:
                continue
            records.append(rec)
    return records


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m dspark_viz.train.prompts",
                                 description="Write the project's math/code/chat prompt suites.")
    ap.add_argument("out_dir", help="folder for train.jsonl and eval.jsonl")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, default=2400)
    ap.add_argument("--n-eval-per-domain", type=int, default=80)
    a = ap.parse_args(argv)
    paths = write_suites(a.out_dir, seed=a.seed, n_train=a.n_train, n_eval_per_domain=a.n_eval_per_domain)
    for split, path in paths.items():
        recs = load_prompts(path)
        counts = {d: sum(r["domain"] == d for r in recs) for d in DOMAINS}
        print(f"{split}: {len(recs)} prompts {counts} -> {path} ({path.stat().st_size / 1024:.1f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
