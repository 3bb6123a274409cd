//! Who may call a route: the [`Role`] of a token (`cairn serve --token-file`), and the [`Access`] each route
//! declares with it, so that no route exists without its rule; and how far it [`Reach`]es, for a token limited to
//! some queues.

use std::fmt;

use cairn::{BatchId, Dequeue, JobId, Push, QueueName};
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

/// How far a route reaches, declared with it, for tokens limited to some queues (`queues` in a token file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The whole server: a list over every queue, the activity log, statistics, run-time options, recurring
    /// templates, bulk actions, SQL. A token limited to some queues may not call it.
    Server,
    /// Only the queues it names: the queue of its path, the queue of its path's job or the queues of its path's
    /// batch, and what [`Route::names`](crate::Route::names) finds in its body. A token limited to some queues may
    /// call it when each of those is one of them.
    Queues,
}

/// What one request names, for a token limited to some queues: queues, jobs and a batch, whose queues it must be
/// limited to; or every queue (a list without a queue to filter by).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    /// The queues named.
    pub queues: Vec<String>,
    /// The jobs named, whose queues the server looks up.
    pub jobs: Vec<JobId>,
    /// The batch named, whose jobs' and callbacks' queues the server looks up.
    pub batch: Option<BatchId>,
    /// Every queue: no token limited to some may make the request.
    pub every_queue: bool,
}

impl Named {
    /// These queues.
    pub fn queues<'a>(queues: impl IntoIterator<Item = &'a str>) -> Named {
        Named {
            queues: queues.into_iter().map(str::to_owned).collect(),
            ..Named::default()
        }
    }

    /// These jobs.
    pub fn jobs(jobs: impl IntoIterator<Item = JobId>) -> Named {
        Named {
            jobs: jobs.into_iter().collect(),
            ..Named::default()
        }
    }

    /// Every queue.
    pub fn every_queue() -> Named {
        Named {
            every_queue: true,
            ..Named::default()
        }
    }

    /// What pushing `pushes` reaches: each job's queue, parent and dependencies.
    pub fn pushes<'a>(pushes: impl IntoIterator<Item = &'a Push>) -> Named {
        let mut named = Named::default();
        for push in pushes {
            named.queues.push(push.queue.clone());
            named.jobs.extend(push.parent);
            named.jobs.extend(&push.depends_on);
        }
        named
    }

    /// The queues `dequeue` takes from: those it names, or `default` when it names none, as the engine takes.
    pub fn dequeue(dequeue: &Dequeue) -> Named {
        if dequeue.queues.is_empty() {
            return Named::queues([QueueName::default().as_str()]);
        }
        Named::queues(dequeue.queues.iter().map(String::as_str))
    }

    /// Adds what `other` names.
    #[must_use]
    pub fn and(mut self, other: Named) -> Named {
        self.queues.extend(other.queues);
        self.jobs.extend(other.jobs);
        self.batch = self.batch.or(other.batch);
        self.every_queue |= other.every_queue;
        self
    }

    /// Whether it names nothing to look up or hold a token to.
    pub fn is_empty(&self) -> bool {
        self == &Named::default()
    }
}

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
