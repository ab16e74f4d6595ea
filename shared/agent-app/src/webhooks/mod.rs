//! Webhooks: a background turn's result POSTed, signed, to a callback URL the deployment allows.
