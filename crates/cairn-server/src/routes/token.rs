//! `GET /v1/token`: who the caller is, as the server sees its token: its name and role, and the queues it is limited
//! to if it is. The dashboard shows it and
//! hides what the role may not do. It is not a request to the queue, so it is not declared in `cairn-api`: it
//! answers about the request itself.

use axum::Json;
use axum::extract::State;
use cairn_api::{ErrorBody, Role};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::CallerOf;
use crate::openapi::ReadErrors;
use crate::state::AppState;

/// The caller's token.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenBody {
    /// Its name in the token file (`token` for `--token`); absent on a server without tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it may do; `admin` on a server without tokens, where every request may do everything.
    pub role: Role,
    /// The only queues it may reach, in order, if it is limited to some; absent for a token of every queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<Vec<String>>,
}

/// The caller's token: its name and role, and its queues if it is limited to some.
#[utoipa::path(get, path = "/v1/token", tag = "server",
    description = "Who may call it, on a server with tokens: any token.",
    responses(
        (status = 200, description = "The token's name and role, and its queues if it is limited to some", body = TokenBody),
        (status = 401, description = "No token, or one the server does not know", body = ErrorBody),
        ReadErrors,
    ))]
pub async fn token(State(state): State<AppState>, CallerOf(caller): CallerOf) -> Json<TokenBody> {
    // The token layer admits only known tokens when the server has any; without, there is no caller.
    let body = match caller {
        Some(caller) => TokenBody {
            name: Some(caller.name),
            role: caller.role,
            queues: caller.queues.map(|queues| queues.iter().cloned().collect()),
        },
        None => {
            debug_assert!(!state.config.has_tokens());
            TokenBody {
                name: None,
                role: Role::Admin,
                queues: None,
            }
        }
    };
    Json(body)
}
