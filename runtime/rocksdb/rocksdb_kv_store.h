// runtime/rocksdb/rocksdb_kv_store.h
//
// The RocksDB plane (library tidemark_rocksdb, CMake target
// tidemark::rocksdb, Debian's librocksdb-dev): the KvStore of
// runtime/state/kv_store.h on an embedded RocksDB, one database per operator
// instance.  Linking tidemark::rocksdb registers it; nothing else includes
// this plane, so a program that never uses the RocksDB state backend neither
// includes nor links RocksDB.
#ifndef TM_RUNTIME_ROCKSDB_ROCKSDB_KV_STORE_H_
#define TM_RUNTIME_ROCKSDB_ROCKSDB_KV_STORE_H_

// Referenced by the link options of tidemark::rocksdb ("-u"), so the linker
// keeps the object whose static initialiser registers the store.
extern "C" int tidemark_rocksdb_link_anchor;

#endif  // TM_RUNTIME_ROCKSDB_ROCKSDB_KV_STORE_H_
