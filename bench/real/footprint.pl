# bench/real/footprint.pl: hash and string churn in perl for bench/footprint.sh.
# Rounds of filling a hash with strings of many lengths, growing some by
# appending, deleting most, keeping a fraction for a few rounds.
# ROUNDS from argv (default 12).
use strict; use warnings;
my $rounds = $ARGV[0] // 12;
srand(1);
my @keep;
my $total = 0;
for my $r (1 .. $rounds) {
    my %h;
    for my $i (1 .. 300_000) {
        $h{"k$r-$i"} = "v" x (($i * 7) % 900);
    }
    for my $i (1 .. 300_000) {
        $h{"k$r-$i"} .= "w" x 200 if $i % 4 == 0;
    }
    my @a = map { [ $_, length $h{$_} ] } grep { /7$/ } keys %h;
    $total += scalar keys %h;
    my %k = map { $_->[0] => $h{$_->[0]} } @a;
    push @keep, \%k;
    shift @keep if @keep > 4;
    undef %h;
}
my $n = 0; $n += scalar keys %$_ for @keep;
print "$total $n\n";
