"""`reason`: the cause of a failure on one line, to go inside a sentence naming the file."""

import tensorflow as tf

from zoo.errors import reason


def test_an_oserror_gives_its_own_words_without_the_file_name():
    assert reason(PermissionError(13, "Permission denied", "/x/y")) == "Permission denied"


def test_a_tensorflow_error_gives_the_first_line_of_its_message():
    error = tf.errors.DataLossError(None, None, "Checksum does not match.\n  a long trace")
    assert reason(error) == "Checksum does not match"


def test_a_string_is_put_on_one_line_without_its_final_period():
    assert reason("bad\n   header  line.") == "bad header line"


def test_an_exception_that_says_nothing_gives_its_type_name():
    assert reason(ValueError()) == "ValueError"
