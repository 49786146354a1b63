//! FTP for hydra (work in progress).
