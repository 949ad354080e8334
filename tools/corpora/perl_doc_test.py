"""The Perl documentation's POD to lines, on made-up pages."""

import pytest

from zoo.tools.corpora import perl_doc

POD = """=encoding utf8

=head1 NAME
X<syntax>

perlfake - Perl's B<fake> page

=head2 The C<sort> function
X<sort>

Use C<< $a <=> $b >> to sort numbers and C<$a E<lt>=E<gt> $b> too;
see L<perlfunc/sort>, L<perlop/"Equality Operators">, L</Local section>,
L<the FAQ|perlfaq4> and L<https://perldoc.perl.org>. A file: F</etc/passwd>.
S<Non breaking>, caf\xe9 and E<eacute>Z<>.

    my @sorted = sort { $a <=> $b } @numbers;

    print "@sorted\\n";

=over 4

=item *

A bullet's text.

=item 2.

A numbered item.

=item B<-w>

Warnings.

=back

=for comment A note for another formatter.

=begin html

<p>Dropped</p>

=end html

=cut

sub code_after_cut { 1 }

=head1 AUTHOR

Larry Wall
"""


def test_pod_pages_become_lines_without_markup(tmp_path, monkeypatch):
    (tmp_path / "perlfake.pod").write_text(POD, encoding="utf-8")
    (tmp_path / "perl5360delta.pod").write_text("=head1 NAME\n\nperl5360delta - what is new\n")  # left out
    (tmp_path / "README").write_text("not a pod file\n")
    monkeypatch.setenv("ZOO_PERL_POD_DIR", str(tmp_path))
    assert list(perl_doc.documents()) == [("perlfake", [
        "NAME",
        "perlfake - Perl's fake page",
        "The sort function",
        'Use $a <=> $b to sort numbers and $a <=> $b too; see "sort" in perlfunc, '
        '"Equality Operators" in perlop, "Local section", the FAQ and https://perldoc.perl.org. '
        "A file: /etc/passwd. Non breaking, caf\xe9 and \xe9.",
        "my @sorted = sort { $a <=> $b } @numbers;",
        'print "@sorted\\n";',
        "A bullet's text.",
        "2. A numbered item.",
        "-w",
        "Warnings.",
        "AUTHOR",
        "Larry Wall"])]


def test_missing_perl_doc_names_the_package(tmp_path, monkeypatch):
    monkeypatch.delenv("ZOO_PERL_POD_DIR", raising=False)
    monkeypatch.setattr(perl_doc, "POD_GLOB", str(tmp_path / "perl" / "5.*" / "pod"))
    with pytest.raises(ValueError, match=r"not installed: run `apt-get install perl-doc` first"):
        list(perl_doc.documents())
    monkeypatch.setenv("ZOO_PERL_POD_DIR", str(tmp_path / "none"))
    with pytest.raises(ValueError, match="apt-get install perl-doc"):
        list(perl_doc.documents())
