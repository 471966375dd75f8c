// SPDX-License-Identifier: Apache-2.0
//
// Samples: records (a path and its label, a dict of fields) that travel
// through native ops. An op works on one field of the record, its payload;
// the record itself is carried along as an opaque value that no op reads
// (in Python pipelines, the tuple or dict the source gave, held by the
// bindings), so carrying it costs a pointer move and never enters Python.
//
//   Sample{payload = "a.jpg", field = 0, record = ("a.jpg", 3)}
//     -> read_file -> Sample{EncodedFile, 0, same record}
//     -> decode_image -> Sample{Buffer, 0, same record}
//   at the consumer: (Buffer, 3), the record with its field replaced.
//
// A batch op (decode_batch, stack) given samples makes a SampleBatch: the
// batch of payloads and the records of the rows it kept, in row order. An
// element it leaves out (an image that does not decode) is a failure of its
// stage, and its record is dropped with it, so rows and records stay
// aligned. In Python the SampleBatch becomes the record's shape with each
// field a column: (Buffer (N, ...), [label, ...]).
//
// Thread safety: a Sample is a value owned by one stage at a time; records
// are shared read-only (a generator's outputs share their input's record).

#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "feedline/pipeline/item.h"
#include "feedline/pipeline/op.h"

namespace feedline::ops {

// Which field of a record an op works on: a position (in a tuple) or a key
// (of a dict).
using Field = std::variant<int64_t, std::string>;

// `field` for messages: "0", "'path'".
std::string field_name(const Field& field);

// A record's opaque value, shared (read-only) by the samples made from it.
using Record = std::shared_ptr<Item>;

struct Sample {
  Item payload;  // the field the ops work on
  Field field;   // where the payload sits in (and goes back into) the record
  Record record;
};

struct SampleBatch {
  Item batch;                   // the batch of payloads (a Buffer)
  Field field;                  // where the batch goes in the result
  std::vector<Record> records;  // one per row of `batch`, in order
};

// Wraps `op` (a map or generator op) so that it also takes Samples whose
// field is `field`: it runs on the payload and its result replaces it (a
// skipped result skips the sample; each output of a generator is a sample
// of the same record). Any other item goes to `op` unchanged, and the
// wrapper declares `op`'s types. A batch op needs no wrapper: it takes
// batches of samples as they are (see SampleBatch).
// Throws: InvalidArgument for a null or async op; a call on a sample of
// another field fails with InvalidArgument naming both fields.
OpPtr on_field(OpPtr op, Field field);

// The field `op` works on if it was made by on_field(); null otherwise.
const Field* op_field(const Op& op);

}  // namespace feedline::ops
