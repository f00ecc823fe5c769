"""One source in two languages: the reader's language choice and the text pieces (notes, tables, folds) every layer builds its messages and outputs from."""
