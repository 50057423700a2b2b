# bench/real/footprint.rb: allocation-heavy ruby for bench/footprint.sh.
# Rounds of building hashes of strings and arrays, keeping a sample of each
# round for a few rounds and dropping the rest (the GC frees it), so the
# heap grows, churns and shrinks. ROUNDS from argv (default 12).
rounds = (ARGV[0] || 12).to_i
srand(1)
keep = []
total = 0
rounds.times do |r|
  h = {}
  150_000.times do |i|
    s = "k#{r}-#{i}"
    h[s] = { name: s * (1 + i % 7), vals: Array.new(i % 20) { |j| j.to_s * (1 + j % 5) },
             blob: "x" * (i % 700) }
  end
  total += h.size
  keep << h.select { |k, _| k.hash % 8 == 0 }
  keep.shift if keep.size > 4
  h = nil
end
puts "#{total} #{keep.sum(&:size)}"
