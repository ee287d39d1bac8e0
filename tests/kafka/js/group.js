// kafkajs in a consumer group, for tests/kafka/groups_helpers.py. One JSON argument; two actions:
//
// {action: "member", bootstrap, topic, group, name, session_ms, heartbeat_ms, max_poll_ms, assignor, batch,
//  limit, metadata, bound_ms}
//   A long-running member: subscribes from the beginning with auto commit off, and after each batch it
//   processed commits exactly what it processed (commitOffsets, with a metadata string), printing one
//   JSON line per event (the same events as the Python members in groups_helpers.py):
//     {ev: "assigned"|"revoked", t, changed, owned}   GROUP_JOIN (its full assignment) / REBALANCING
//     {ev: "records", t, recs: [[partition, offset, key], ...]}
//     {ev: "committed", t, offsets: {partition: next}, metadata} or {ev: "commit_failed", t, error, type}
//     {ev: "crash", t, error, type, code, restart}    kafkajs gave up (e.g. INCONSISTENT_GROUP_PROTOCOL)
//     {ev: "closed", t}
//   `t` is CLOCK_MONOTONIC in seconds (process.hrtime, as Python's time.monotonic). A line "close" on
//   stdin, or stdin closing, makes it leave the group (disconnect) and exit 0; so does reaching
//   `limit` processed records. assignor "roundrobin": kafkajs's round robin under the name the other
//   clients give theirs ("roundrobin"), else kafkajs's own ("RoundRobinAssigner"); the two assign
//   alike, only the protocol name the broker matches members on differs.
//
// {action: "offsets", bootstrap, group, topic} -> {partitions: [{partition, offset, metadata}]}
//   admin.fetchOffsets (OffsetFetch): the group's committed offsets, -1 where none.
'use strict'
const { Kafka, PartitionAssigners, logLevel } = require('kafkajs')

const now = () => Number(process.hrtime.bigint()) / 1e9

function emit(ev, fields) {
  // stdout to a pipe is synchronous on Linux: a line written before a kill -9 is not lost
  process.stdout.write(JSON.stringify({ ev, t: now(), ...fields }) + '\n')
}

function client(args) {
  return new Kafka({
    clientId: args.name || 'strata-kafkajs-group',
    brokers: args.bootstrap.split(','),
    logLevel: logLevel.ERROR,         // kafkajs logs errors with console.error: stderr, not our stdout
    connectionTimeout: 5000,
    requestTimeout: 20000,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 2000 },
  })
}

function renamed(name) {
  return config => ({ ...PartitionAssigners.roundRobin(config), name })
}

function originalCause(e) {
  return e && e.cause ? originalCause(e.cause) : e
}

async function member(args) {
  const topic = args.topic
  const consumer = client(args).consumer({
    groupId: args.group,
    sessionTimeout: args.session_ms,
    heartbeatInterval: args.heartbeat_ms,
    rebalanceTimeout: args.max_poll_ms,
    maxWaitTimeInMs: 200,
    partitionAssigners: [args.assignor === 'roundrobin' ? renamed('roundrobin') : PartitionAssigners.roundRobin],
  })
  let owned = []
  let processed = 0
  let closing = null
  const limit = args.limit === null || args.limit === undefined ? null : args.limit

  const close = () => {
    if (closing === null) {
      closing = consumer.disconnect().then(() => {
        emit('closed', {})
        process.exit(0)
      }, e => {
        emit('close_failed', { error: String(e && e.message) })
        process.exit(2)
      })
    }
    return closing
  }
  setTimeout(() => { emit('bound_passed', {}); process.exit(3) }, args.bound_ms || 240000).unref()

  const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events
  consumer.on(GROUP_JOIN, e => {
    owned = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    emit('assigned', { changed: owned, owned, member_id: e.payload.memberId, leader: e.payload.isLeader,
                       protocol: e.payload.groupProtocol })
  })
  consumer.on(REBALANCING, () => {
    emit('revoked', { changed: owned, owned: [] })
    owned = []
  })
  consumer.on(CRASH, e => {
    const cause = originalCause(e.payload.error)
    emit('crash', { error: String(e.payload.error && e.payload.error.message), type: cause && cause.type,
                    code: cause && cause.code, restart: e.payload.restart })
    if (!e.payload.restart) {
      emit('closed', {})
      process.exit(0)
    }
  })

  let buffered = ''
  process.stdin.on('data', chunk => {
    buffered += chunk.toString()
    if (buffered.split('\n').some(line => line.trim() === 'close')) close()
  })
  process.stdin.on('end', () => close())

  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
      if (closing !== null || !isRunning() || isStale()) return
      let messages = batch.messages
      if (limit !== null) messages = messages.slice(0, Math.max(0, limit - processed))
      if (messages.length === 0) return
      emit('records', { recs: messages.map(m => [batch.partition, Number(m.offset),
                                                 m.key === null ? null : m.key.toString()]) })
      processed += messages.length
      for (const m of messages) resolveOffset(m.offset)
      const next = Number(messages[messages.length - 1].offset) + 1
      const metadata = args.metadata ? `${args.metadata}-p${batch.partition}-o${next}` : null
      try {
        await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(next), metadata }])
        emit('committed', { offsets: { [batch.partition]: next }, metadata: { [batch.partition]: metadata || '' } })
      } catch (e) {
        emit('commit_failed', { error: String(e && e.message), type: e && e.type })
      }
      if (limit !== null && processed >= limit) setImmediate(close)
    },
  })
  emit('subscribed', {})
}

async function offsets(args) {
  const admin = client(args).admin()
  await admin.connect()
  try {
    const [answer] = await admin.fetchOffsets({ groupId: args.group, topics: [args.topic] })
    return { partitions: answer.partitions.map(p => ({ partition: p.partition, offset: Number(p.offset),
                                                       metadata: p.metadata })) }
  } finally {
    await admin.disconnect()
  }
}

const args = JSON.parse(process.argv[2])
if (args.action === 'member') {
  member(args).catch(e => {
    const cause = originalCause(e)
    emit('crash', { error: String(e && e.message), type: cause && cause.type, code: cause && cause.code,
                    restart: false })
    console.error(e && e.stack ? e.stack : e)
    process.exit(2)
  })
} else if (args.action === 'offsets') {
  const bound = setTimeout(() => { console.error('bound passed'); process.exit(3) }, args.bound_ms || 50000)
  offsets(args).then(out => {
    process.stdout.write(JSON.stringify(out) + '\n')
    clearTimeout(bound)
    process.exit(0)
  }, e => {
    console.error(e && e.stack ? e.stack : e)
    process.exit(2)
  })
} else {
  console.error(`unknown action ${args.action}`)
  process.exit(2)
}
