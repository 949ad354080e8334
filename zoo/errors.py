"""How the zoo words a failure: one sentence that names the file or address, with the cause
inside it (`reason`)."""


def reason(error):
    """The cause an exception (or a message string) gives, on one line and without a final
    period, to go inside a sentence that already names the file: an `OSError`'s own words
    ("Permission denied"), the first line of a TensorFlow error's message, else `str(error)`;
    the exception's type name when it says nothing."""
    if isinstance(error, str):
        text = error
    elif isinstance(error, OSError) and error.strerror:
        text = error.strerror
    elif isinstance(getattr(error, "message", None), str):  # tf.errors.OpError: a long trace follows
        text = error.message.strip().split("\n", 1)[0]
    else:
        text = str(error)
    text = " ".join(text.split()).rstrip(".")
    return text or type(error).__name__
