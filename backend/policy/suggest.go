package policy

import "strings"

// suggest returns the candidate that name most likely misspells, or "". It ignores case, "_"
// and "-", allows one edit (two for longer words, a swap counting as one), and with byEnding
// also matches a known name that ends in name ("mode" → "accessMode").
func suggest(name string, candidates []string, byEnding bool) string {
	n := normalizeName(name)
	best, bestDist := "", 3
	for _, c := range candidates {
		cn := normalizeName(c)
		if n == cn {
			return c
		}
		limit := 1
		if len(cn) >= 6 {
			limit = 2
		}
		if d := editDistance(n, cn); d <= limit && d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" && byEnding && len(n) >= 4 {
		for _, c := range candidates {
			if strings.HasSuffix(normalizeName(c), n) {
				return c
			}
		}
	}
	return best
}

func normalizeName(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
}

// editDistance is the optimal string alignment distance: insertions, deletions, substitutions
// and swaps of neighbours each cost one.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
