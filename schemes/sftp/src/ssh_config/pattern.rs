//! `ssh_config(5)` PATTERNS: `*` (any run of characters), `?` (exactly one), `!` negation in
//! pattern lists.

/// True when `text` matches the wildcard `pattern` (`*`, `?`; every other character literal).
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Greedy match with backtracking to the last `*`: linear in practice, never recursive.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// One entry of a pattern list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The wildcard, without its `!`.
    pub glob: String,
    /// A `!` entry: a match excludes.
    pub negated: bool,
}

impl Pattern {
    /// `!glob` or `glob`.
    pub fn parse(token: &str) -> Pattern {
        match token.strip_prefix('!') {
            Some(g) => Pattern {
                glob: g.to_owned(),
                negated: true,
            },
            None => Pattern {
                glob: token.to_owned(),
                negated: false,
            },
        }
    }
}

/// OpenSSH's rule for a pattern list: some positive entry matches and no negated one does.
/// With `fold_case` (host names) both sides are compared in lower case.
pub fn list_matches(patterns: &[Pattern], text: &str, fold_case: bool) -> bool {
    let text = if fold_case {
        text.to_lowercase()
    } else {
        text.to_owned()
    };
    let mut positive = false;
    for p in patterns {
        let glob = if fold_case {
            p.glob.to_lowercase()
        } else {
            p.glob.clone()
        };
        if wildcard(&glob, &text) {
            if p.negated {
                return false;
            }
            positive = true;
        }
    }
    positive
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(s: &str) -> Vec<Pattern> {
        s.split_whitespace().map(Pattern::parse).collect()
    }

    #[test]
    fn star_and_question_mark_match_as_in_openssh() {
        assert!(wildcard("*", ""));
        assert!(wildcard("*.example.com", "a.b.example.com"));
        assert!(!wildcard("*.example.com", "example.com"));
        assert!(wildcard("web?", "web1"));
        assert!(!wildcard("web?", "web12"));
        assert!(!wildcard("web?", "web"));
        assert!(wildcard("a*b*c", "axxbyyc"));
        assert!(!wildcard("a*b*c", "axxbyy"));
        assert!(
            wildcard("[ab]", "[ab]"),
            "brackets are literal in ssh patterns"
        );
    }

    #[test]
    fn a_negated_match_excludes_whatever_else_matches() {
        let l = list("*.example.com !secret.example.com");
        assert!(list_matches(&l, "www.example.com", true));
        assert!(!list_matches(&l, "secret.example.com", true));
        assert!(!list_matches(&l, "other.org", true));
        // Order does not matter: the negation wins wherever it stands.
        assert!(!list_matches(
            &list("!secret.example.com *"),
            "secret.example.com",
            true
        ));
    }

    #[test]
    fn a_list_of_negations_alone_matches_nothing() {
        assert!(!list_matches(&list("!foo"), "bar", true));
    }

    #[test]
    fn host_names_match_case_insensitively_users_do_not() {
        assert!(list_matches(&list("Build*"), "BUILDER", true));
        assert!(!list_matches(&list("Alice"), "alice", false));
    }

    /// A reference matcher: the textbook recursive definition.
    fn reference(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('*', rest)) => (0..=t.len()).any(|i| reference(rest, &t[i..])),
            Some((&c, rest)) => {
                !t.is_empty() && (c == '?' || c == t[0]) && reference(rest, &t[1..])
            }
        }
    }

    proptest! {
        #[test]
        fn the_wildcard_matcher_agrees_with_the_recursive_definition(
            p in "[ab*?]{0,8}", t in "[ab]{0,10}"
        ) {
            let pc: Vec<char> = p.chars().collect();
            let tc: Vec<char> = t.chars().collect();
            prop_assert_eq!(wildcard(&p, &t), reference(&pc, &tc));
        }

        #[test]
        fn any_pattern_and_text_match_or_not_without_panicking(p in "\\PC{0,20}", t in "\\PC{0,20}") {
            let _ = list_matches(&[Pattern::parse(&p)], &t, true);
        }
    }
}
