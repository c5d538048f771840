//! Properties of part names and schema globs: names are checked against the grammar
//! written out, globs agree with a reference matcher over path segments for the syntax
//! schemas use (`*`, a whole-segment `**`, `{a,b}`), and no input makes either panic.

use proptest::prelude::*;

use super::{BodySchema, Part, PartGlob, check_part_name, media_type};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// `/` then one or more non-empty segments of `A-Za-z0-9._-`, joined by `/`.
fn name_reference(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('/') else {
        return false;
    };
    rest.split('/').all(|segment| {
        !segment.is_empty()
            && segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    })
}

/// One piece of a segment pattern.
#[derive(Debug, Clone)]
enum Item {
    Literal(String),
    /// `*`: any run of characters other than `/`.
    Star,
    /// `{a,b}`: any one of its branches (literals, `*` and `/`, never empty).
    Alternation(Vec<Vec<Item>>),
}

/// One segment of a pattern: `**` or a sequence of items.
#[derive(Debug, Clone)]
enum Segment {
    /// `**`: whole segments, any number of them (at least one when it ends the pattern).
    Globstar,
    Items(Vec<Item>),
}

#[derive(Debug, Clone)]
struct Pattern {
    absolute: bool,
    segments: Vec<Segment>,
}

impl Pattern {
    fn render(&self) -> String {
        fn items(list: &[Item]) -> String {
            list.iter()
                .map(|item| match item {
                    Item::Literal(text) => text.clone(),
                    Item::Star => "*".to_owned(),
                    Item::Alternation(branches) => {
                        let branches: Vec<String> = branches.iter().map(|b| items(b)).collect();
                        format!("{{{}}}", branches.join(","))
                    }
                })
                .collect()
        }
        let segments: Vec<String> = self
            .segments
            .iter()
            .map(|segment| match segment {
                Segment::Globstar => "**".to_owned(),
                Segment::Items(list) => items(list),
            })
            .collect();
        let joined = segments.join("/");
        if self.absolute {
            format!("/{joined}")
        } else {
            joined
        }
    }
}

/// A pattern piece after alternations are expanded.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    Char(char),
    Star,
    Slash,
    Globstar,
}

/// Every alternation-free token sequence the pattern stands for.
fn expand(pattern: &Pattern) -> Vec<Vec<Token>> {
    fn items(list: &[Item]) -> Vec<Vec<Token>> {
        let mut out = vec![Vec::new()];
        for item in list {
            let choices: Vec<Vec<Token>> = match item {
                Item::Literal(text) => vec![
                    text.chars()
                        .map(|c| {
                            if c == '/' {
                                Token::Slash
                            } else {
                                Token::Char(c)
                            }
                        })
                        .collect(),
                ],
                Item::Star => vec![vec![Token::Star]],
                Item::Alternation(branches) => branches.iter().flat_map(|b| items(b)).collect(),
            };
            out = out
                .iter()
                .flat_map(|prefix| {
                    choices.iter().map(move |choice| {
                        let mut next = prefix.clone();
                        next.extend(choice);
                        next
                    })
                })
                .collect();
        }
        out
    }
    let mut out = vec![if pattern.absolute {
        vec![Token::Slash]
    } else {
        Vec::new()
    }];
    for (index, segment) in pattern.segments.iter().enumerate() {
        let choices = match segment {
            Segment::Globstar => vec![vec![Token::Globstar]],
            Segment::Items(list) => items(list),
        };
        out = out
            .iter()
            .flat_map(|prefix| {
                choices.iter().map(move |choice| {
                    let mut next = prefix.clone();
                    if index > 0 {
                        next.push(Token::Slash);
                    }
                    next.extend(choice);
                    next
                })
            })
            .collect();
    }
    out
}

/// The reference matcher: split pattern and candidate at `/`; `*` matches within one
/// segment, a `**` segment any number of whole segments (one or more at the end).
fn reference_match(tokens: &[Token], candidate: &str) -> bool {
    fn within(pattern: &[Token], text: &[char]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some((Token::Star, rest)) => (0..=text.len()).any(|n| within(rest, &text[n..])),
            Some((Token::Char(c), rest)) => text.first() == Some(c) && within(rest, &text[1..]),
            Some((Token::Slash | Token::Globstar, _)) => unreachable!("split at `/`"),
        }
    }
    fn segments(pattern: &[&[Token]], text: &[Vec<char>]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some((&[Token::Globstar], rest)) => {
                let least = usize::from(rest.is_empty());
                (least..=text.len()).any(|n| segments(rest, &text[n..]))
            }
            Some((segment, rest)) => {
                !text.is_empty() && within(segment, &text[0]) && segments(rest, &text[1..])
            }
        }
    }
    let pattern: Vec<&[Token]> = tokens.split(|t| *t == Token::Slash).collect();
    let text: Vec<Vec<char>> = candidate.split('/').map(|s| s.chars().collect()).collect();
    segments(&pattern, &text)
}

fn literal() -> impl Strategy<Value = Item> {
    "[ab.]{1,2}".prop_map(Item::Literal)
}

/// Items with no two `*` side by side (`**` within a segment means `*` to the glob, but
/// reads as a globstar when it fills a segment).
fn items(branch: bool) -> BoxedStrategy<Vec<Item>> {
    let leaf = if branch {
        prop_oneof![3 => literal(), 1 => Just(Item::Literal("/".into())), 2 => Just(Item::Star)]
            .boxed()
    } else {
        let branches = prop::collection::vec(items(true), 2..=3).prop_map(Item::Alternation);
        prop_oneof![3 => literal(), 2 => Just(Item::Star), 1 => branches].boxed()
    };
    prop::collection::vec(leaf, 1..=3)
        .prop_map(|list| {
            let mut out: Vec<Item> = Vec::new();
            for item in list {
                let star = matches!(item, Item::Star);
                if !(star && matches!(out.last(), Some(Item::Star))) {
                    out.push(item);
                }
            }
            out
        })
        .boxed()
}

fn pattern() -> impl Strategy<Value = Pattern> {
    let segment =
        prop_oneof![1 => Just(Segment::Globstar), 3 => items(false).prop_map(Segment::Items)];
    (any::<bool>(), prop::collection::vec(segment, 1..=4))
        .prop_map(|(absolute, segments)| Pattern { absolute, segments })
}

/// A candidate the pattern matches, spelled out from `choices`.
fn instantiate(tokens: &[Token], choices: &[u8]) -> String {
    let mut choices = choices.iter().cycle();
    let mut pick = |n: usize| usize::from(*choices.next().unwrap()) % n;
    let mut out = String::new();
    for token in tokens {
        match token {
            Token::Char(c) => out.push(*c),
            Token::Slash => out.push('/'),
            Token::Star => {
                for _ in 0..pick(3) {
                    out.push(['a', 'b', '.'][pick(3)]);
                }
            }
            Token::Globstar => {
                let segments = ["x", "a/b", "b.a/x/a", ""];
                out.push_str(segments[pick(segments.len())]);
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn part_names_follow_the_grammar(
        name in prop_oneof!["[/a-z0-9._\\- é?]{0,12}", "(/[a-zA-Z0-9._\\-]{1,4}){1,4}", any::<String>()],
    ) {
        prop_assert_eq!(check_part_name(&name).is_ok(), name_reference(&name), "{:?}", name);
    }

    #[test]
    fn globs_agree_with_the_reference(pattern in pattern(), candidate in "[ab./]{0,10}") {
        let text = pattern.render();
        let glob = PartGlob::new(&text).unwrap();
        let expected = expand(&pattern).iter().any(|tokens| reference_match(tokens, &candidate));
        prop_assert_eq!(glob.is_match(&candidate), expected, "{} on {:?}", text, candidate);
    }

    #[test]
    fn globs_match_what_they_spell(
        pattern in pattern(),
        which in any::<prop::sample::Index>(),
        choices in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let text = pattern.render();
        let glob = PartGlob::new(&text).unwrap();
        let expansions = expand(&pattern);
        let tokens = which.get(&expansions);
        let candidate = instantiate(tokens, &choices);
        prop_assert!(reference_match(tokens, &candidate), "reference: {} on {:?}", text, candidate);
        prop_assert!(glob.is_match(&candidate), "{} on {:?}", text, candidate);
    }

    #[test]
    fn any_glob_compiles_or_is_refused_and_matching_never_panics(
        pattern in prop_oneof!["[a/*{},?\\[\\]!\\-\\\\]{0,16}", any::<String>()],
        candidate in any::<String>(),
    ) {
        if let Ok(glob) = PartGlob::new(&pattern) {
            prop_assert_eq!(glob.pattern(), pattern.as_str());
            glob.is_match(&candidate);
        }
    }

    #[test]
    fn media_types_drop_parameters(
        base in "[a-z]{1,8}/[a-z0-9.+\\-]{1,8}",
        pad in "[ \t]{0,2}",
        params in "[ -~]{0,16}",
        anything in any::<String>(),
    ) {
        let with_params = format!("{pad}{base}{pad};{params}");
        prop_assert_eq!(media_type(&with_params), base.as_str());
        let bare = format!("{pad}{base}{pad}");
        prop_assert_eq!(media_type(&bare), base.as_str());
        let media = media_type(&anything);
        prop_assert!(!media.contains(';'));
        prop_assert_eq!(media, media.trim());
    }

    #[test]
    fn an_empty_schema_accepts_exactly_bodies_with_valid_unique_names(
        names in prop::collection::vec(prop::option::of(prop_oneof!["(/[ab]{1,2}){1,2}", "[/ab ]{0,4}"]), 0..5),
    ) {
        let body: Vec<Part> = names
            .iter()
            .map(|name| Part { name: name.clone(), ..Part::text("text/plain", "x") })
            .collect();
        let named: Vec<&String> = names.iter().flatten().collect();
        let unique = named.iter().collect::<std::collections::HashSet<_>>().len() == named.len();
        let valid = named.iter().all(|n| name_reference(n));
        prop_assert_eq!(BodySchema::default().check(&body).is_ok(), unique && valid, "{:?}", names);
    }
}
