// Shared by the kafkajs scripts the Python tests run: one JSON argument in, one JSON line out.
// Records travel as {key, value, headers: [[name, value]], timestamp, partition, offset}, bytes in base64
// (null stays null), so non-UTF-8 bytes and null header values survive the trip exactly.
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const b64 = b => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))
const unb64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

function kafka(args) {
  return new Kafka({
    clientId: 'strata-kafkajs-test',
    brokers: args.brokers.split(','),
    logLevel: logLevel.ERROR,
    connectionTimeout: 5000,
    requestTimeout: 20000,
    retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 2000 },
  })
}

function toMessage(r) {
  const headers = {}
  for (const [k, v] of r.headers) headers[k] = unb64(v)
  return { key: unb64(r.key), value: unb64(r.value), headers, timestamp: String(r.timestamp), partition: r.partition }
}

function fromMessage(m, partition) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) headers.push([k, b64(v)])
  return { key: b64(m.key), value: b64(m.value), headers, timestamp: Number(m.timestamp), partition,
           offset: Number(m.offset) }
}

async function main(run) {
  const args = JSON.parse(process.argv[2])
  const bound = setTimeout(() => { console.error(`bound of ${args.boundMs || 50000} ms passed`); process.exit(3) },
                           args.boundMs || 50000)
  try {
    const out = await run(args)
    process.stdout.write(JSON.stringify(out) + '\n')
    clearTimeout(bound)
    process.exit(0)
  } catch (e) {
    console.error(e && e.stack ? e.stack : e)
    if (e && e.originalError) console.error('original:', e.originalError)
    process.exit(2)
  }
}

module.exports = { kafka, toMessage, fromMessage, main, b64, unb64 }
