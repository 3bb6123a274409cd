//! [`NameFamilies`]: how the statistics and metrics group job names, so that names made per entity
//! (`Worker?accountID=42`) add neither a statistics row nor a metrics series each.

use crate::error::{Error, Result};

/// The most characters a name may be cut at.
const MAX_CUT_CHARACTERS: usize = 16;

/// How the statistics (per minute and hour), the histograms and the Prometheus metrics group job names: each name
/// counts under its family, the name up to the first of the cut characters (all of it when it holds none). The
/// default cuts at `?`, so that `Worker?accountID=42` counts as `Worker`. The job itself, its activity and its
/// events keep the whole name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameFamilies {
    cut: Vec<char>,
}

impl Default for NameFamilies {
    fn default() -> Self {
        NameFamilies { cut: vec!['?'] }
    }
}

impl NameFamilies {
    /// Families cut at each of `characters` (`"?#"`); none keeps every name whole.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `stats_name_cut` for more than 16 characters,
    /// or a control character or space among them.
    pub fn cut_at(characters: &str) -> Result<NameFamilies> {
        let cut: Vec<char> = characters.chars().collect();
        if cut.len() > MAX_CUT_CHARACTERS {
            return Err(Error::invalid(
                "stats_name_cut",
                format!(
                    "must be at most {MAX_CUT_CHARACTERS} characters, got {}",
                    cut.len()
                ),
            ));
        }
        if let Some(bad) = cut.iter().find(|c| c.is_control() || c.is_whitespace()) {
            return Err(Error::invalid(
                "stats_name_cut",
                format!("must be visible characters, got {bad:?}"),
            ));
        }
        Ok(NameFamilies { cut })
    }

    /// Every name its own family: the statistics as they were before families, one row per name.
    pub fn whole_names() -> NameFamilies {
        NameFamilies { cut: Vec::new() }
    }

    /// The characters names are cut at.
    pub fn cut_characters(&self) -> String {
        self.cut.iter().collect()
    }

    /// The family `name` counts under.
    pub fn family<'n>(&self, name: &'n str) -> &'n str {
        match name.find(|c| self.cut.contains(&c)) {
            Some(at) => &name[..at],
            None => name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_name_counts_under_what_comes_before_its_first_cut() {
        let families = NameFamilies::default();
        assert_eq!(families.family("Worker?accountID=42"), "Worker");
        assert_eq!(families.family("email.send"), "email.send");
        assert_eq!(families.family("?id=1"), "");
        let two = NameFamilies::cut_at("#/").unwrap();
        assert_eq!(two.family("report/7#a?b"), "report");
        assert_eq!(NameFamilies::whole_names().family("W?a=1"), "W?a=1");
        assert_eq!(
            NameFamilies::cut_at("? ").unwrap_err().to_string(),
            "stats_name_cut: must be visible characters, got ' '"
        );
    }

    proptest! {
        #[test]
        fn a_family_is_a_prefix_holding_no_cut(name in "\\PC{0,40}", cut in "[?#/:|]{0,3}") {
            let families = NameFamilies::cut_at(&cut).unwrap();
            let family = families.family(&name);
            prop_assert!(name.starts_with(family));
            prop_assert!(!family.chars().any(|c| cut.contains(c)));
            prop_assert_eq!(families.family(family), family);
        }
    }
}
