"""Pulsar's stored entry, as pure functions over bytes: `entry` (header, CRC32C, MessageMetadata)
and `batch` (client batches, compression). The broker stores and dispatches entries with these;
the offloader unpacks them into rows and rebuilds them byte for byte."""
