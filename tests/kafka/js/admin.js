// {brokers, action, topic, ...} -> JSON. Actions: create {partitions, configs}, describeConfigs, addPartitions
// {total}, delete, partitionCount (null when the topic is not there).
'use strict'
const { ConfigResourceTypes } = require('kafkajs')
const { kafka, main } = require('./common')

main(async args => {
  const admin = kafka(args).admin()
  await admin.connect()
  try {
    const topic = args.topic
    switch (args.action) {
      case 'create':
        return { created: await admin.createTopics({ waitForLeaders: false, timeout: 20000, topics: [{
          topic, numPartitions: args.partitions, replicationFactor: 1,
          configEntries: Object.entries(args.configs || {}).map(([name, value]) => ({ name, value })) }] }) }
      case 'describeConfigs': {
        const answer = await admin.describeConfigs({ includeSynonyms: false,
                                                     resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }] })
        const out = {}
        for (const r of answer.resources) {
          if (r.errorCode !== 0) throw new Error(JSON.stringify(r))
          for (const e of r.configEntries) out[e.configName] = e.configValue
        }
        return out
      }
      case 'addPartitions':
        return { ok: await admin.createPartitions({ timeout: 20000, topicPartitions: [{ topic, count: args.total }] }) }
      case 'delete':
        await admin.deleteTopics({ topics: [topic], timeout: 20000 })
        return { ok: true }
      case 'partitionCount': {
        const all = await admin.listTopics()
        if (!all.includes(topic)) return { count: null }
        const md = await admin.fetchTopicMetadata({ topics: [topic] })
        return { count: md.topics[0].partitions.length }
      }
      default:
        throw new Error(`unknown action ${args.action}`)
    }
  } finally {
    await admin.disconnect()
  }
})
