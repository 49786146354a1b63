//! SFTP for hydra (work in progress).
