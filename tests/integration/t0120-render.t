#!/bin/sh

test_description='herd render: the DeepSpeed ZeRO-3 config and the fine-tuning job from templates/, --set values and defaults, checks of what comes out, -o writes atomically, a user template, every error named'

. "$(dirname "$0")/test-lib.sh"

require_cmd jq stat

test_expect_success '--list names the templates and where they are' '
	herd render --list >out &&
	grep "^herd.s templates in $HERD_ROOT/templates:" out &&
	grep "^  ds_zero3   ds_zero3.json$" out &&
	grep "^  finetune   finetune.yaml$" out &&
	grep "^  sbatch     sbatch.sh$" out
'

test_expect_success 'ds_zero3 with its defaults is a ZeRO-3 config' '
	herd render ds_zero3 >ds.json &&
	jq -e ".zero_optimization.stage == 3 and
		.train_micro_batch_size_per_gpu == 1 and
		.gradient_accumulation_steps == 1 and
		.bf16.enabled == true and
		.zero_optimization.offload_optimizer.device == \"none\" and
		.zero_optimization.stage3_gather_16bit_weights_on_model_save" ds.json
'

test_expect_success '--set fills placeholders; the last --set of a name wins' '
	herd render ds_zero3 --set micro_batch=2 --set=grad_accum=8 \
		--set offload_optimizer=cpu --set micro_batch=4 --set lr=1e-4 >ds.json &&
	jq -e ".train_micro_batch_size_per_gpu == 4 and
		.gradient_accumulation_steps == 8 and
		.optimizer.params.lr == 0.0001 and
		.zero_optimization.offload_optimizer.device == \"cpu\" and
		.zero_optimization.offload_param.device == \"none\"" ds.json
'

test_expect_success 'a --set the template does not use is an error (a typo)' '
	test_expect_code 2 herd render ds_zero3 --set micro_bach=4 >out 2>err &&
	test_must_be_empty out &&
	grep "^herd: --set micro_bach: ds_zero3.json.tmpl has no {{micro_bach}} (did you mean .micro_batch.?)$" err &&
	test_expect_code 2 herd render ds_zero3 --set nothing_like_it=4 2>err &&
	grep "^herd: --set nothing_like_it: ds_zero3.json.tmpl has no {{nothing_like_it}}$" err
'

test_expect_success 'a value that breaks the JSON is caught, with line and column' '
	test_expect_code 2 herd render ds_zero3 --set micro_batch=four >out 2>err &&
	test_must_be_empty out &&
	grep "^herd: ds_zero3.json:2:[0-9]*: the rendered file is not JSON: .*four" err
'

test_expect_success 'finetune: every value without a default is named at once' '
	test_expect_code 2 herd render finetune 2>err &&
	grep "^herd: finetune.yaml.tmpl: no value for model, hosts: give --set NAME=VALUE for each$" err
'

test_expect_success 'finetune -o DIR: a valid job; {{resume_args}} and {{checkpoint}} are left for herd run' '
	herd render finetune --set "hosts=gpu[01-04]" --set model=org/model-7b \
		--set gpus_per_node=8 -o job >out &&
	echo "wrote job/finetune.yaml" >expect && test_cmp expect out &&
	test "$(stat -c %a job/finetune.yaml)" = 644 &&
	test -z "$(ls -A job | grep "^\.")" &&
	herd validate job/finetune.yaml &&
	herd validate --print job/finetune.yaml >spec &&
	grep "command: .*--model_name_or_path org/model-7b --deepspeed ds_zero3.json --output_dir checkpoints {{resume_args}}" spec &&
	grep "resume_args: --resume_from_checkpoint {{checkpoint}}" spec &&
	grep "slots: 8" spec &&
	herd hosts job/finetune.yaml >hosts &&
	printf "gpu01\ngpu02\ngpu03\ngpu04\n" >expect && test_cmp expect hosts &&
	herd render ds_zero3 -o job >/dev/null &&
	jq -e ".zero_optimization.stage == 3" job/ds_zero3.json
'

test_expect_success 'herd run fills {{resume_args}} of a rendered job (empty without a checkpoint)' '
	herd render finetune --set hosts=localhost --set model=m --set gpus_per_node=1 \
		--set python=echo -o run >/dev/null &&
	herd run --dry-run run/finetune.yaml >dry &&
	grep "command: echo train.py --model_name_or_path m --deepspeed ds_zero3.json --output_dir checkpoints *$" dry
'

test_expect_success 'a value that breaks the job is caught as herd validate would' '
	test_expect_code 2 herd render finetune --set hosts=h1 --set model=m \
		--set restarts=-1 -o bad 2>err &&
	grep "^herd: finetune.yaml:[0-9]*:[0-9]*: .*restart.max" err &&
	test ! -e bad/finetune.yaml
'

test_expect_success 'a --set value that would be shell code in launch.command or a script is refused; hosts and extra_args words pass (issue 23)' '
	test_expect_code 2 herd render finetune --set hosts=h1 \
		--set "model=org/m; touch F;" -o inj >out 2>err &&
	echo "herd: --set model: '"'"'org/m; touch F;'"'"' goes into launch.command, which /bin/sh reads, and holds '"'"';'"'"': a value there may hold only letters, digits, spaces and ._=,:/+-@% (write such a value into the job file yourself, quoted)" >expect &&
	test_cmp expect err &&
	test_must_be_empty out &&
	test ! -e inj/finetune.yaml &&
	test_expect_code 2 herd render finetune --set hosts=h1 --set "model=\$(id)" 2>err &&
	grep -F "holds '"'"'\$'"'"'" err &&
	test_expect_code 2 herd render finetune --set hosts=h1 --set model=m \
		--set "extra_args=--x \`id\`" 2>err &&
	grep -F "extra_args: " err &&
	test_expect_code 2 herd render finetune --set model=m \
		--set "hosts=h1\"
restart: {max: 99}
x: \"" 2>err &&
	grep -F "herd: --set hosts: the value holds a control character" err &&
	herd render finetune --set "hosts=gpu[01-02]" --set model=org/m-7b \
		--set "extra_args=--bf16 --lr 2e-5 --tag=a,b:c" -o ok >/dev/null &&
	herd validate --print ok/finetune.yaml >spec &&
	grep -F -- "--output_dir checkpoints {{resume_args}} --bf16 --lr 2e-5 --tag=a,b:c" spec &&
	printf "#!/bin/sh\necho {{who}}\n" >hi2.sh.tmpl &&
	test_expect_code 2 herd render ./hi2.sh.tmpl --set "who=x; touch F" 2>err &&
	grep -F "goes into the script, which /bin/sh reads" err &&
	test ! -e F
'

test_expect_success 'a user template by path; a script keeps its mode 0755' '
	mkdir -p mine &&
	printf "#!/bin/sh\necho {{greeting|hello}} {{who}}\n" >mine/hi.sh.tmpl &&
	herd render mine/hi.sh.tmpl --set who=world -o outdir >/dev/null &&
	test "$(stat -c %a outdir/hi.sh)" = 755 &&
	test "$(./outdir/hi.sh)" = "hello world" &&
	herd render ./mine/hi.sh.tmpl --set who=x --set greeting=bye >stdout &&
	test "$(tail -n 1 stdout)" = "echo bye x"
'

test_expect_success 'unknown templates, bad options and unreadable files are named' '
	test_expect_code 2 herd render nope 2>err &&
	grep "^herd: no template .nope.: herd.s templates are ds_zero3, finetune, sbatch (in $HERD_ROOT/templates), or give a file$" err &&
	test_expect_code 2 herd render ./missing.tmpl 2>err &&
	grep "^herd: ./missing.tmpl: No such file or directory$" err &&
	test_expect_code 2 herd render ds_zero3 --set novalue 2>err &&
	grep "^herd: --set novalue: expected NAME=VALUE" err &&
	test_expect_code 2 herd render ds_zero3 --set "a b=1" 2>err &&
	grep "expected NAME=VALUE" err &&
	test_expect_code 2 herd render ds_zero3 --bogus 2>err &&
	grep "unknown option .--bogus." err &&
	test_expect_code 2 herd render ds_zero3 finetune 2>err &&
	grep "one template at a time" err &&
	test_expect_code 2 herd render 2>err &&
	grep "^try .herd render --help.$" err &&
	herd render --help | grep "^usage: herd render TEMPLATE"
'

test_expect_success 'an output directory that cannot be written fails with 1 and keeps nothing' '
	echo file >notadir &&
	test_expect_code 1 herd render ds_zero3 -o notadir/sub 2>err &&
	grep "^herd: cannot make notadir/sub: Not a directory$" err
'

test_done
