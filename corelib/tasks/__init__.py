"""Tasks with known answers: Markov chain (this book's first experiment) and more to come."""
