//! Credentials for an OCI registry, by Docker's conventions: `~/.docker/config.json`
//! (or `$DOCKER_CONFIG/config.json`): its `auths` (base64 `user:password`), its
//! `credHelpers` and `credsStore` (the `docker-credential-*` programs). Anonymous
//! when none is configured.

use oci_client::secrets::RegistryAuth;

/// The credentials for `host` (`HOST[:PORT]`).
pub(crate) fn for_host(host: &str) -> RegistryAuth {
    // Docker Hub's credentials are filed under its legacy index address.
    let server = if host == "docker.io" || host == "index.docker.io" {
        "https://index.docker.io/v1/"
    } else {
        host
    };
    match docker_credential::get_credential(server) {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            RegistryAuth::Basic(user, password)
        }
        // An identity token is a refresh token for Docker's OAuth flow, which the
        // client does not speak; without it the pull is anonymous and the registry
        // says so if it needs more.
        Ok(docker_credential::DockerCredential::IdentityToken(_)) | Err(_) => {
            RegistryAuth::Anonymous
        }
    }
}
