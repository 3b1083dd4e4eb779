//! Did-you-mean: the known name closest to a misspelt one, for error messages (config field
//! names, kinds).

/// The known name closest to `key`: equal ignoring case and `_`/`-`, else within an edit
/// distance of a third of its length (at least 2).
pub(crate) fn closest<'a>(key: &str, known: impl Iterator<Item = &'a String>) -> Option<&'a str> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let key_n = norm(key);
    let limit = (key_n.chars().count() / 3).max(2);
    known
        .map(|k| (strsim::damerau_levenshtein(&key_n, &norm(k)), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn closest_finds_typos_case_and_snake_case() {
        let known = names(&["byObject", "syncPeriod", "defaultLabelSelector"]);
        assert_eq!(closest("byObjects", known.iter()), Some("byObject"));
        assert_eq!(closest("sync_period", known.iter()), Some("syncPeriod"));
        assert_eq!(
            closest("DefaultLabelSelecter", known.iter()),
            Some("defaultLabelSelector")
        );
        assert_eq!(closest("zzz", known.iter()), None);
    }
}
