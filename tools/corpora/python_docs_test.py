"""The Python documentation's reStructuredText to prose lines."""

from zoo.tools.corpora import python_docs


def test_python_docs_keep_prose_and_drop_code():
    rst = """.. _tut-x:

*******
Classes
*******

Classes provide a means of bundling :func:`data <x.y>` and ``functionality``
together.  See :ref:`tut-private` for **more**. For example::

   class MyClass:
       pass

.. note::

   Notes are kept: they are prose too.

.. code-block:: python

   print("dropped")

>>> 1 + 1
2

Afterwards the prose goes on.
"""
    assert python_docs.prose_lines(rst) == [
        "Classes",
        "Classes provide a means of bundling data and functionality together. See tut-private for more. "
        "For example:",
        "Notes are kept: they are prose too.",
        "Afterwards the prose goes on."]
