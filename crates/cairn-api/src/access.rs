//! Who may call a route: the [`Role`] of a token (`cairn serve --token-file`), and the [`Access`] each route
//! declares with it, so that no route exists without its rule.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    /// Reading: jobs, lists, queues, statistics, the activity log and its stream; the dashboard without its
    /// buttons.
    Read,
    /// Pushing jobs and batches, and reading a job or batch (to wait for what it pushed).
    Enqueue,
    /// A worker's: taking jobs and everything under a lease (heartbeats, checkpoints, finishes, retries, fails);
    /// pushing jobs too (a handler's follow-up jobs), and reading a job.
    Work,
    /// Everything: changes to any job, queue settings, run-time options, recurring templates, SQL.
    Admin,
}

impl Role {
    /// Every role, least first.
    pub const ALL: [Role; 4] = [Role::Read, Role::Enqueue, Role::Work, Role::Admin];

    /// Its name, as a token file and an error say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Enqueue => "enqueue",
            Role::Work => "work",
            Role::Admin => "admin",
        }
    }

    /// The role named `name`.
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == name)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may call a route: anyone ([`PUBLIC`]), or a token of one of `roles` or of [`Role::Admin`], which may call
/// every route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Answered without a token.
    pub public: bool,
    /// The roles besides `admin` that may call it.
    pub roles: &'static [Role],
}

impl Access {
    /// Whether a token of `role` may call the route.
    pub fn allows(&self, role: Role) -> bool {
        self.public || role == Role::Admin || self.roles.contains(&role)
    }

    /// The roles that may call it, for messages and the OpenAPI document: `read, admin`, or `anyone`.
    pub fn describe(&self) -> String {
        if self.public {
            return "anyone, without a token".to_owned();
        }
        let mut names: Vec<&str> = self.roles.iter().map(|role| role.as_str()).collect();
        names.push("admin");
        names.join(", ")
    }
}

/// The liveness check: anyone.
pub const PUBLIC: Access = Access {
    public: true,
    roles: &[],
};

/// A read of the queue: `read` (and `admin`).
pub const READ: Access = Access {
    public: false,
    roles: &[Role::Read],
};

/// A read of one job or batch, which producers and workers make of theirs too.
pub const READ_ONE: Access = Access {
    public: false,
    roles: &[Role::Read, Role::Enqueue, Role::Work],
};

/// Pushing jobs and batches: producers, and workers (a handler's follow-up jobs).
pub const ENQUEUE: Access = Access {
    public: false,
    roles: &[Role::Enqueue, Role::Work],
};

/// Taking jobs and acting under a lease: workers.
pub const WORK: Access = Access {
    public: false,
    roles: &[Role::Work],
};

/// Changing what others made, or how the queue runs: `admin` alone.
pub const ADMIN: Access = Access {
    public: false,
    roles: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_may_do_everything_and_each_role_what_it_is_given() {
        for access in [PUBLIC, READ, READ_ONE, ENQUEUE, WORK, ADMIN] {
            assert!(access.allows(Role::Admin));
        }
        assert!(READ.allows(Role::Read) && !READ.allows(Role::Enqueue) && !READ.allows(Role::Work));
        assert!(ENQUEUE.allows(Role::Work) && !ENQUEUE.allows(Role::Read));
        assert!(!ADMIN.allows(Role::Work));
        assert!(PUBLIC.allows(Role::Read));
        assert_eq!(READ_ONE.describe(), "read, enqueue, work, admin");
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
