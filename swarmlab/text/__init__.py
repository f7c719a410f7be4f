"""Text data preparation: augmenting the IMDB splits and encoding them into token ids."""
