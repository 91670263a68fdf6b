"""The emulated device runtime (TensorFlow-specific, used by the API front).

``ipu_options``           the ``IpuOptions`` record a configuration becomes, with its enums
``ipu_backend``           ``configure_ipu_system``'s backend: device checks -> the configured system
``configured_system``     which TensorFlow IPU devices exist and how many IPUs each has
``programs``              what one ``ipu_compiler.compile`` built: its loops, feeds and outputs
``graph_loops``           a device loop built into a graph: v1 control flow, name scope, infeed
``pipeline_builder``      ``pipelining_ops.pipeline`` built as one while loop over the micro-batches
``gradient_accumulators`` an accumulator's type and how a gradient is added to it
``shards``                which IPU of a device an op runs on, made real with CPU devices
``graph_rewrites``        sessions and ``tf.function``s run without TensorFlow's Grappler rewrites
``thread_spinning``       sessions' thread pools sleep when idle instead of spinning
``autograph_rules``       AutoGraph calls the emulated SDK unconverted, as it calls TensorFlow's
``replication``           a program on more IPUs than its shards runs as copies
``variable_creations``    a second build of the same code gets the first build's variables
``late_compile``          a program built for another device is built again at its first run
``first_run``             what the SDK's compiler refuses, checked at a program's first run
``session_run``           every ``Session.run`` of a compiled program becomes one engine run
``model_parallel``        the cost of each shard or pipeline stage a run records
``graph_costs``           per-iteration FLOPs and bytes read off the TensorFlow graph
``float16``               float16 ops computed in float32, rounded to float16 as the IPU stores them
``device_types``          which tensor types may live on the IPU
``feed_messages``         the SDK's feed messages and checks, shared by every raiser
``tf2_feeds``             TF2 feeds: infeeds as iterators, outfeeds as host buffers
``tf2_programs``          one call of a ``tf.function`` run by ``IPUStrategy`` = one engine run
``keras_stages``          IPU Keras pipelines: each layer's stage, the plan, each stage's cost
``memory_release``        heap memory TensorFlow freed, given back to the system when idle
``event_trace``           the IPU trace events ``gen_ipu_ops.ipu_event_trace`` returns, from the record
"""
