//! How far a misspelt word is from a vocabulary word: the optimal string
//! alignment distance (insertions, deletions, substitutions and swaps of
//! two neighbouring characters, each one edit), and how many edits a word
//! of a given length may carry and still be read as a typo.

/// Edits a word of `chars` characters may be away from the word it was
/// meant as: none up to 2 characters, one up to 5, two beyond (the
/// "AUTO" fuzziness of Elasticsearch's match queries). A shorter word
/// leaves too little to tell a typo from another word.
pub fn typo_edits_allowed(chars: usize) -> usize {
    match chars {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    }
}

/// The optimal string alignment distance between `a` and `b`, counted in
/// characters, when it is at most `max`; `None` beyond. A swap of two
/// neighbouring characters (recieve, refnud) counts one edit, as a
/// person's typo does.
pub fn osa_distance_within(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let width = b.len() + 1;
    // Three rows of the table: two back (for swaps), the last, the current.
    let mut before: Vec<usize> = vec![0; width];
    let mut last: Vec<usize> = (0..width).collect();
    let mut row: Vec<usize> = vec![0; width];
    for i in 1..=a.len() {
        row[0] = i;
        let mut least = row[0];
        for j in 1..width {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
            least = least.min(d);
        }
        // Every later cell is at least the least of this row.
        if least > max {
            return None;
        }
        std::mem::swap(&mut before, &mut last);
        std::mem::swap(&mut last, &mut row);
    }
    let d = last[b.len()];
    (d <= max).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The distance by the textbook table, unbounded.
    fn reference(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut t = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, r) in t.iter_mut().enumerate() {
            r[0] = i;
        }
        t[0] = (0..=b.len()).collect();
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                t[i][j] = (t[i - 1][j] + 1)
                    .min(t[i][j - 1] + 1)
                    .min(t[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    t[i][j] = t[i][j].min(t[i - 2][j - 2] + 1);
                }
            }
        }
        t[a.len()][b.len()]
    }

    #[test]
    fn typos_people_make_are_one_edit_and_other_words_are_further() {
        assert_eq!(osa_distance_within("refnud", "refund", 2), Some(1));
        assert_eq!(osa_distance_within("reciev", "receiv", 2), Some(1));
        assert_eq!(osa_distance_within("pasword", "password", 2), Some(1));
        assert_eq!(osa_distance_within("declni", "declin", 2), Some(1));
        assert_eq!(osa_distance_within("refund", "refund", 0), Some(0));
        assert_eq!(osa_distance_within("north", "norman", 2), None);
        assert_eq!(osa_distance_within("punch", "launch", 1), None);
        assert_eq!(osa_distance_within("channel", "chang", 2), None);
        assert_eq!(osa_distance_within("退宽", "退款", 1), Some(1));
    }

    #[test]
    fn short_words_carry_fewer_edits() {
        assert_eq!(typo_edits_allowed(2), 0);
        assert_eq!(typo_edits_allowed(3), 1);
        assert_eq!(typo_edits_allowed(5), 1);
        assert_eq!(typo_edits_allowed(6), 2);
        assert_eq!(typo_edits_allowed(14), 2);
    }

    proptest! {
        #[test]
        fn the_bounded_distance_is_the_table_s_within_its_bound(
            a in "[abc]{0,7}",
            b in "[abc]{0,7}",
            max in 0usize..4,
        ) {
            let full = reference(&a, &b);
            let expected = (full <= max).then_some(full);
            prop_assert_eq!(osa_distance_within(&a, &b, max), expected);
            prop_assert_eq!(osa_distance_within(&a, &b, max), osa_distance_within(&b, &a, max));
        }
    }
}
